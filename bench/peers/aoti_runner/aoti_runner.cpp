// aoti_runner: runs a .pt2 package compiled by AOTInductor (bench/peers/aoti_resnet50.py compile) from
// C++, as a C++ user deploys one: LibTorch's torch::inductor::AOTIModelPackageLoader, no Python. The
// deployment table's C++ AOTI row (tools/gpu/deploy.sh, docs/codegen.md "Deployment beside
// AOTInductor"); the counterpart of the model_run that strata_codegen writes.
//
//   aoti_runner PACKAGE.pt2 INPUT.npy OUTPUT.npy [--repeat N] [--warmup W]
//
// Reads INPUT.npy (float32, little-endian, C order; anything else is refused naming the file), loads
// the package (it extracts the model's .so and loads it), copies the input to the GPU, runs, copies
// the output back and writes OUTPUT.npy: the first result. With --repeat N, after W untimed runs
// (default 20), N timed runs of loader.run on the GPU-resident input:
//   host_ms    a steady clock around run() (the host's cost; run() enqueues on the current stream)
//   device_ms  a CUDA event pair around it on that stream
//   wall_ms    run() and the end event's synchronize
// and N runs of io_wall_ms: the input copied in from host memory, run(), the output copied out
// (synchronous, as model_run and strata_codegen --time time one run).
// Prints one JSON line: load and first-run times, the time from main() to the first result written
// (shared libraries' initialisers run before main(): deploy.sh times the whole process), the shared
// libraries mapped at that point (/proc/self/maps: the model's own .so, extracted from the package,
// apart), the statistics (median, p10, p90, min) and the output's sum.
// TF32 is off for cuDNN and cuBLAS as for strata's f32: the convolutions and matmuls the compiled
// model calls are ATen's, which read these flags when they run.
// Exit status: 0 done, 1 an error (said on stderr), 2 a usage error.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
// Initialised with the program's own globals, just before main(): after the libraries' initialisers.
const Clock::time_point kStart = Clock::now();

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

// The value after `key` in a .npy header dict ({'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }).
std::string header_value(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) k = header.find("\"" + key + "\"");
  if (k == std::string::npos) fail(path + ": .npy header has no '" + key + "': " + header);
  size_t v = header.find(':', k);
  if (v == std::string::npos) fail(path + ": malformed .npy header: " + header);
  v = header.find_first_not_of(' ', v + 1);
  if (v == std::string::npos) fail(path + ": malformed .npy header: " + header);
  if (header[v] == '\'' || header[v] == '"') {
    const size_t e = header.find(header[v], v + 1);
    if (e == std::string::npos) fail(path + ": malformed .npy header: " + header);
    return header.substr(v + 1, e - v - 1);
  }
  if (header[v] == '(') {
    const size_t e = header.find(')', v);
    if (e == std::string::npos) fail(path + ": malformed .npy header: " + header);
    return header.substr(v, e - v + 1);
  }
  const size_t e = header.find_first_of(",}", v);
  std::string word = header.substr(v, e == std::string::npos ? std::string::npos : e - v);
  while (!word.empty() && word.back() == ' ') word.pop_back();
  return word;
}

struct Npy {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// A NumPy .npy file of float32 in C order, versions 1 to 3; anything else is refused by name.
Npy read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open");
  char magic[8] = {};
  f.read(magic, 8);
  if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t header_len = 0;
  unsigned char len[4] = {};
  if (major == 1) {
    f.read(reinterpret_cast<char*>(len), 2);
    header_len = len[0] | (len[1] << 8);
  } else if (major == 2 || major == 3) {
    f.read(reinterpret_cast<char*>(len), 4);
    header_len = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<uint32_t>(len[3]) << 24);
  } else {
    fail(path + ": .npy format version " + std::to_string(major) + " is not one of 1, 2, 3");
  }
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);
  if (!f) fail(path + ": truncated .npy header");
  const std::string descr = header_value(header, "descr", path);
  if (descr != "<f4")
    fail(path + ": dtype '" + descr + "', but aoti_runner reads float32 ('<f4') only");
  if (header_value(header, "fortran_order", path) != "False")
    fail(path + ": Fortran order, but aoti_runner reads C order only");
  Npy n;
  const std::string shape = header_value(header, "shape", path);
  std::stringstream dims(shape.substr(1, shape.size() - 2));
  for (std::string d; std::getline(dims, d, ',');) {
    d.erase(0, d.find_first_not_of(' '));
    if (d.empty()) continue;  // the trailing comma of a 1-tuple
    char* end = nullptr;
    const long long v = std::strtoll(d.c_str(), &end, 10);
    if (end == d.c_str() || v < 0) fail(path + ": bad shape " + shape);
    n.shape.push_back(v);
  }
  if (n.shape.empty()) fail(path + ": a scalar, want an array");
  int64_t count = 1;
  for (int64_t d : n.shape) count *= d;
  n.data.resize(static_cast<size_t>(count));
  f.read(reinterpret_cast<char*>(n.data.data()), static_cast<std::streamsize>(count * sizeof(float)));
  if (!f) fail(path + ": holds fewer than the " + std::to_string(count) + " floats its shape " + shape + " says");
  return n;
}

// Version 1.0, float32, C order; the header padded so that the data starts at a multiple of 64.
void write_npy(const std::string& path, const at::Tensor& y) {
  std::string shape;  // a Python tuple: "(1, 1000)", "(5,)"
  for (int64_t d : y.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  shape = "(" + shape + (y.dim() == 1 ? ",)" : ")");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xff),
                                 static_cast<unsigned char>(header.size() >> 8)};
  f.write(reinterpret_cast<const char*>(pre), 10);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(y.data_ptr()), static_cast<std::streamsize>(y.numel() * sizeof(float)));
  f.close();
  if (!f) fail(path + ": cannot write");
}

struct Libs {
  int count = 0;
  uint64_t bytes = 0;
  int own_count = 0;
  uint64_t own_bytes = 0;
};

// The distinct shared objects this process has mapped (by real path), as bench/peers/deploy_libs.py
// counts them; those under the package's extracted "aotinductor" folder are the model's own code.
Libs mapped_libs() {
  Libs r;
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> seen;
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::string addr, perms, offset, dev, inode, path;
    in >> addr >> perms >> offset >> dev >> inode;
    std::getline(in, path);
    path.erase(0, path.find_first_not_of(' '));
    if (path.empty() || path[0] != '/' || path.find(" (deleted)") != std::string::npos) continue;
    const std::string base = std::filesystem::path(path).filename().string();
    const size_t so = base.find(".so");
    if (so == std::string::npos || (so + 3 != base.size() && base[so + 3] != '.')) continue;
    std::error_code ec;
    const std::string real = std::filesystem::canonical(path, ec).string();
    if (ec || !seen.insert(real).second) continue;
    const uint64_t size = std::filesystem::file_size(real, ec);
    if (ec) continue;
    if (path.find("aotinductor") != std::string::npos) {
      ++r.own_count;
      r.own_bytes += size;
    } else {
      ++r.count;
      r.bytes += size;
    }
  }
  return r;
}

std::string stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto q = [&](double p) {  // linear interpolation, as resnet50_common.quantile
    const double pos = p * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  char buf[200];
  std::snprintf(buf, sizeof buf, "{\"median\": %.6f, \"p10\": %.6f, \"p90\": %.6f, \"min\": %.6f}", q(0.5), q(0.1),
                q(0.9), v.front());
  return buf;
}

at::Tensor first_output(const std::vector<at::Tensor>& out) {
  if (out.empty()) fail("the model returned no output");
  return out[0];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> pos;
  int repeat = 0, warmup = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--repeat" || a == "--warmup") && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 0 || v > 10000000) {
        std::fprintf(stderr, "aoti_runner: %s wants a count >= 0, not '%s'\n", a.c_str(), argv[i]);
        return 2;
      }
      (a == "--repeat" ? repeat : warmup) = static_cast<int>(v);
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() != 3) {
    std::fprintf(stderr, "usage: %s PACKAGE.pt2 INPUT.npy OUTPUT.npy [--repeat N] [--warmup W]\n", argv[0]);
    return 2;
  }
  try {
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
    c10::InferenceMode inference;
    Npy x = read_npy(pos[1]);
    const at::Tensor x_host = at::from_blob(x.data.data(), x.shape, at::TensorOptions().dtype(at::kFloat));

    auto t = Clock::now();
    torch::inductor::AOTIModelPackageLoader loader(pos[0]);
    const double load_ms = ms_since(t);

    t = Clock::now();
    at::Tensor y = first_output(loader.run({x_host.to(at::kCUDA)})).to(at::kCPU).contiguous();
    const double first_run_ms = ms_since(t);
    if (y.scalar_type() != at::kFloat) fail("the model's output is not float32");
    write_npy(pos[2], y);
    const double to_first_result_ms = ms_since(kStart);
    const Libs libs = mapped_libs();
    double sum = 0;
    bool finite = true;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const float v = y.data_ptr<float>()[i];
      sum += v;
      finite = finite && std::isfinite(v);
    }

    std::string timing;
    if (repeat > 0) {
      const at::Tensor x_dev = x_host.to(at::kCUDA);
      for (int i = 0; i < warmup; ++i) loader.run({x_dev});
      at::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);  // timing enabled
      end.record();
      end.synchronize();
      std::vector<double> host, dev, wall, io;
      for (int i = 0; i < repeat; ++i) {
        start.record();
        const auto t0 = Clock::now();
        loader.run({x_dev});
        const auto t1 = Clock::now();
        end.record();
        end.synchronize();
        const auto t2 = Clock::now();
        host.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        wall.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
        dev.push_back(start.elapsed_time(end));
      }
      for (int i = 0; i < warmup; ++i) first_output(loader.run({x_host.to(at::kCUDA)})).to(at::kCPU);
      for (int i = 0; i < repeat; ++i) {
        const auto t0 = Clock::now();
        first_output(loader.run({x_host.to(at::kCUDA)})).to(at::kCPU);
        io.push_back(ms_since(t0));
      }
      timing = ", \"host_ms\": " + stats(host) + ", \"device_ms\": " + stats(dev) + ", \"wall_ms\": " + stats(wall) +
               ", \"io_wall_ms\": " + stats(io);
    }
    char sum_buf[32];
    std::snprintf(sum_buf, sizeof sum_buf, "%.9g", sum);
    const std::string sum_text = std::isfinite(sum) ? sum_buf : "null";  // JSON has no NaN or infinity
    std::string shape;
    for (int64_t d : y.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    std::printf("{\"what\": \"aoti_cpp\", \"torch\": \"%s\", \"load_s\": %.6f, \"first_run_ms\": %.3f, "
                "\"main_to_first_result_s\": %.6f, \"output_shape\": [%s], \"output_sum\": %s, "
                "\"output_finite\": %s, \"libs\": {\"count\": %d, \"bytes\": %llu, \"own_count\": %d, "
                "\"own_bytes\": %llu}, \"repeat\": %d, \"warmup\": %d%s}\n",
                TORCH_VERSION, load_ms / 1e3, first_run_ms, to_first_result_ms / 1e3, shape.c_str(), sum_text.c_str(),
                finite ? "true" : "false", libs.count, static_cast<unsigned long long>(libs.bytes), libs.own_count,
                static_cast<unsigned long long>(libs.own_bytes), repeat, warmup, timing.c_str());
    return 0;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "aoti_runner: error: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aoti_runner: error: %s\n", e.what());
    return 1;
  }
}
