// study_libtorch: the LibTorch (C++ frontend) peer of the abstraction-cost study
// (docs/study.md). The same protocol and JSON record as bench/study/study_resnet50 and
// bench/peers/study_torch.py; built on the GPU machine against the torch package's
// own CMake files (tools/gpu/study.sh libtorch), or against any LibTorch for a CPU
// smoke test (--device cpu).
//
//   study_libtorch sweep --points 8x64,32x32 --kinds eval,train --json libtorch_sweep.json
//   study_libtorch parity --data DIR --json libtorch_parity.json   (DIR/parity_*.pt from
//                                                                    study_torch.py convert)
// Policy as strata's default: TF32 off for cuDNN and cuBLAS, cudnn benchmark off,
// deterministic cuDNN. Per point and kind a fresh model, the host-to-device copy of one
// batch timed on its own (pageable, pinned), warm-up steps, then timed steps.
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifndef STRATA_VERSION  // strata's project() version, for --version
#error "STRATA_VERSION is not defined: build with bench/study/libtorch/CMakeLists.txt or tools/study/build_libtorch_gxx.sh"
#endif

#include "../nvml.h"
#include "../stats.h"
#include "resnet50.h"

#ifdef STUDY_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
using strata::study::Summary;
const auto g_start = Clock::now();

double since_start_s() { return std::chrono::duration<double>(Clock::now() - g_start).count(); }

// --- a minimal JSON writer (the peer depends on nothing but LibTorch) ----------------
std::string quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o + "\"";
}
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}
// An object built field by field: {"a": 1, "b": "x"}.
struct Obj {
  std::vector<std::pair<std::string, std::string>> f;
  Obj& raw(const std::string& k, const std::string& v) {
    for (auto& kv : f)
      if (kv.first == k) {
        kv.second = v;
        return *this;
      }
    f.emplace_back(k, v);
    return *this;
  }
  Obj& put(const std::string& k, double v) { return raw(k, num(v)); }
  Obj& put(const std::string& k, const std::string& v) { return raw(k, quote(v)); }
  Obj& put(const std::string& k, const char* v) { return raw(k, quote(v)); }
  Obj& put(const std::string& k, const Obj& o) { return raw(k, o.str()); }
  std::string str() const {
    std::string s = "{";
    for (size_t i = 0; i < f.size(); ++i) s += (i ? ", " : "") + quote(f[i].first) + ": " + f[i].second;
    return s + "}";
  }
};
Obj summary_json(const Summary& s) {
  Obj o;
  o.put("n", static_cast<double>(s.n)).put("median", s.median).put("p10", s.p10).put("p90", s.p90);
  return o.put("p99", s.p99).put("min", s.min).put("max", s.max).put("mean", s.mean);
}

struct Doc {
  Obj head;
  std::vector<std::string> records;
  void write(const std::string& path) const {
    if (path.empty()) return;
    std::string s = head.str();
    s.pop_back();
    s += ", \"records\": [\n";
    for (size_t i = 0; i < records.size(); ++i) s += (i ? ",\n" : "") + records[i];
    s += "\n]}\n";
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp) << s;
    std::rename(tmp.c_str(), path.c_str());
  }
};

// --- options --------------------------------------------------------------------------
struct Options {
  std::string cmd, device = "cuda", json, points = "8x64,32x32,32x64,32x128,32x256,128x32,256x64,512x32",
                   kinds = "eval,train", data;
  int warmup = 3, h2d_repeats = 5, batch = 64, epochs = 2;
  strata::study::RepeatPolicy repeats;
  double deadline = 1e9, lr = 0.01, parity_lr = 0.005;
  uint64_t seed = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::printf("study_libtorch (strata) %s\n", STRATA_VERSION);
    std::exit(0);
  }
  if (argc < 2 || (std::string(argv[1]) != "sweep" && std::string(argv[1]) != "parity"))
    throw std::runtime_error("usage: study_libtorch sweep|parity [--points ..] [--kinds eval,train] [--json F] "
                             "[--device cuda|cpu] [--min-repeats N] [--max-repeats N] [--min-seconds S] "
                             "[--warmup N] [--h2d-repeats N] [--deadline S] [--lr X] [--seed N] "
                             "[--data DIR] [--batch N] [--epochs N] [--parity-lr X]");
  o.cmd = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("study_libtorch: " + k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--points") o.points = v;
    else if (k == "--kinds") o.kinds = v;
    else if (k == "--json") o.json = v;
    else if (k == "--device") o.device = v;
    else if (k == "--data") o.data = v;
    else if (k == "--min-repeats") o.repeats.min_repeats = std::stoi(v);
    else if (k == "--max-repeats") o.repeats.max_repeats = std::stoi(v);
    else if (k == "--min-seconds") o.repeats.min_seconds = std::stod(v);
    else if (k == "--warmup") o.warmup = std::max(1, std::stoi(v));
    else if (k == "--h2d-repeats") o.h2d_repeats = std::stoi(v);
    else if (k == "--deadline") o.deadline = std::stod(v);
    else if (k == "--lr") o.lr = std::stod(v);
    else if (k == "--parity-lr") o.parity_lr = std::stod(v);
    else if (k == "--seed") o.seed = std::stoull(v);
    else if (k == "--batch") o.batch = std::stoi(v);
    else if (k == "--epochs") o.epochs = std::stoi(v);
    else throw std::runtime_error("study_libtorch: unknown option " + k);
  }
  return o;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

// --- device helpers ---------------------------------------------------------------------
struct Device {
  torch::Device dev{torch::kCPU};
  bool cuda = false;
  void sync() const {
#ifdef STUDY_WITH_CUDA
    if (cuda) torch::cuda::synchronize();
#endif
  }
  void reset_peak() const {
#ifdef STUDY_WITH_CUDA
    if (cuda) c10::cuda::CUDACachingAllocator::resetPeakStats(0);
#endif
  }
  // {peak allocated, peak reserved} since reset_peak; -1 off the GPU.
  std::pair<double, double> peak() const {
#ifdef STUDY_WITH_CUDA
    if (cuda) {
      const auto st = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
      return {static_cast<double>(st.allocated_bytes[0].peak), static_cast<double>(st.reserved_bytes[0].peak)};
    }
#endif
    return {-1, -1};
  }
  void empty_cache() const {
#ifdef STUDY_WITH_CUDA
    if (cuda) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  }
};

// Device time by CUDA events on the current stream, host time to enqueue and wall
// time by steady_clock; on the CPU device time is the wall time.
class Timer {
 public:
  explicit Timer(const Device& d) : d_(d) {
#ifdef STUDY_WITH_CUDA
    if (d_.cuda) {
      cudaEventCreate(&a_);
      cudaEventCreate(&b_);
    }
#endif
  }
  ~Timer() {
#ifdef STUDY_WITH_CUDA
    if (d_.cuda) {
      cudaEventDestroy(a_);
      cudaEventDestroy(b_);
    }
#endif
  }
  void begin() {
    t0_ = Clock::now();
#ifdef STUDY_WITH_CUDA
    if (d_.cuda) cudaEventRecord(a_, c10::cuda::getCurrentCUDAStream().stream());
#endif
  }
  void enqueued() {
    t1_ = Clock::now();
#ifdef STUDY_WITH_CUDA
    if (d_.cuda) cudaEventRecord(b_, c10::cuda::getCurrentCUDAStream().stream());
#endif
  }
  std::array<double, 3> finish() {
    double dev = -1;
#ifdef STUDY_WITH_CUDA
    if (d_.cuda) {
      cudaEventSynchronize(b_);
      float ms = 0;
      cudaEventElapsedTime(&ms, a_, b_);
      dev = ms;
    }
#endif
    const auto t2 = Clock::now();
    auto ms = [](Clock::duration x) { return std::chrono::duration<double, std::milli>(x).count(); };
    return {dev >= 0 ? dev : ms(t2 - t0_), ms(t1_ - t0_), ms(t2 - t0_)};
  }

 private:
  const Device& d_;
  Clock::time_point t0_, t1_;
#ifdef STUDY_WITH_CUDA
  cudaEvent_t a_ = nullptr, b_ = nullptr;
#endif
};

Obj time_h2d(const Device& d, int64_t b, int64_t r, int repeats) {
  torch::Tensor host = torch::empty({b, 3, r, r}).uniform_(-1.7, 1.7);
  torch::Tensor pinned = d.cuda ? host.pin_memory() : host;
  auto med = [&](const torch::Tensor& src, bool non_blocking) {
    std::vector<double> ms;
    for (int i = 0; i < repeats; ++i) {
      d.sync();
      const auto t0 = Clock::now();
      torch::Tensor y = src.to(d.dev, non_blocking);
      d.sync();
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return strata::study::quantile(ms, 0.5);
  };
  Obj o;
  o.put("bytes", static_cast<double>(host.numel() * host.element_size()));
  o.put("pageable_ms", med(host, false)).put("pinned_ms", med(pinned, true));
  return o.put("repeats", static_cast<double>(repeats));
}

Obj nvml_reading(const strata::study::NvmlReading& r) {
  Obj o;
  auto opt = [&](const char* k, const auto& v) { v ? o.put(k, static_cast<double>(*v)) : o.raw(k, "null"); };
  o.put("window_s", r.window_s).put("util_samples", r.util_samples).put("power_samples", r.power_samples);
  opt("gpu_util_pct", r.gpu_util_pct);
  opt("power_w", r.power_w);
  opt("energy_mj", r.energy_mj);
  opt("mem_used_bytes", r.mem_used_bytes);
  return o;
}

bool is_oom(const std::string& w) { return w.find("out of memory") != std::string::npos; }
// LibTorch's messages carry a C++ backtrace after the first line.
std::string first_line(const std::string& w) { return w.substr(0, std::min<size_t>(w.find('\n'), 300)); }

// --- the sweep ----------------------------------------------------------------------------
Obj measure(const Options& o, const Device& d, strata::study::Nvml* nv, bool train, int64_t b, int64_t r) {
  Obj rec;
  rec.put("impl", "libtorch").put("framework", "libtorch").put("kind", train ? "train" : "eval");
  rec.put("batch", static_cast<double>(b)).put("resolution", static_cast<double>(r)).put("dtype", "f32");
  rec.put("layout", "NCHW");
  try {
    d.sync();
    d.empty_cache();
    const auto t_build = Clock::now();
    torch::manual_seed(static_cast<uint64_t>(o.seed));
    study_libtorch::ResNet50 model;
    model->to(d.dev);
    model->train(train);
    torch::Tensor x = torch::empty({b, 3, r, r}, torch::TensorOptions().device(d.dev)).uniform_(-1.7, 1.7);
    torch::Tensor labels = torch::randint(0, 1000, {b}, torch::TensorOptions().dtype(torch::kLong).device(d.dev));
    rec.put("h2d", time_h2d(d, b, r, o.h2d_repeats));
    std::unique_ptr<torch::optim::SGD> opt;
    if (train) opt = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(o.lr).momentum(0.9));
    d.sync();
    d.reset_peak();
    rec.put("setup_s", std::chrono::duration<double>(Clock::now() - t_build).count());
    auto step = [&]() -> torch::Tensor {
      if (train) {
        opt->zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), labels);
        loss.backward();
        opt->step();
        return loss.detach();
      }
      torch::NoGradGuard ng;
      return model->forward(x);
    };
    const auto t_first = Clock::now();
    step();
    d.sync();
    rec.put("first_step_s", std::chrono::duration<double>(Clock::now() - t_first).count());
    for (int i = 1; i < o.warmup; ++i) step();
    d.sync();
    Timer timer(d);
    std::vector<double> dev, host, wall;
    double check = NAN;
    const strata::study::NvmlWindow w = nv ? nv->begin() : strata::study::NvmlWindow{};
    const auto t_start = Clock::now();
    for (int n = 1;; ++n) {
      const bool last = o.repeats.done(n, std::chrono::duration<double>(Clock::now() - t_start).count());
      timer.begin();
      torch::Tensor out = step();
      timer.enqueued();
      const auto t = timer.finish();
      dev.push_back(t[0]);
      host.push_back(t[1]);
      wall.push_back(t[2]);
      if (last) {
        check = out.to(torch::kCPU).to(torch::kDouble).sum().item<double>();
        break;
      }
    }
    const strata::study::NvmlReading nr = nv ? nv->end(w) : strata::study::NvmlReading{};
    const Summary ds = strata::study::summarize(dev);
    rec.put("repeats", static_cast<double>(dev.size())).put("warmup", o.warmup);
    rec.put("device_ms", summary_json(ds)).put("host_ms", summary_json(strata::study::summarize(host)));
    rec.put("wall_ms", summary_json(strata::study::summarize(wall)));
    rec.put("ms_per_sample", ds.median / static_cast<double>(b)).put("img_per_s", static_cast<double>(b) * 1e3 / ds.median);
    rec.put("check", check).put("nvml", nvml_reading(nr));
    if (nr.energy_mj)
      rec.put("energy_mj_per_sample", *nr.energy_mj / static_cast<double>(dev.size() * static_cast<size_t>(b)));
    else
      rec.raw("energy_mj_per_sample", "null");
    const auto [peak, reserved] = d.peak();
    if (peak >= 0) rec.put("peak_bytes", peak).put("reserved_bytes", reserved);
    rec.put("status", "ok");
    std::printf("libtorch %-5s %5lld x %-5lld ok %9.3f ms/sample  dev %9.3f  host %9.3f  p99 %9.3f ms  n=%zu\n",
                train ? "train" : "eval", static_cast<long long>(b), static_cast<long long>(r), ds.median / b,
                ds.median, strata::study::summarize(host).median, ds.p99, dev.size());
  } catch (const std::exception& e) {
    rec.put("status", is_oom(e.what()) ? "oom" : "error").put("note", std::string(e.what()).substr(0, 2000));
    std::printf("libtorch %-5s %5lld x %-5lld %s\n", train ? "train" : "eval", static_cast<long long>(b),
                static_cast<long long>(r), first_line(e.what()).c_str());
  }
  std::fflush(stdout);
  d.empty_cache();
  return rec;
}

Obj header(const Device& d, const char* part, strata::study::Nvml* nv) {
  Obj h;
  h.put("study", 1).put("framework", "libtorch").put("part", part);
  Obj v;
  v.put("torch", TORCH_VERSION);
  h.put("versions", v);
  Obj dev;
  dev.put("name", nv && nv->ok() ? nv->name() : (d.cuda ? "cuda" : "cpu"));
  h.put("device", dev);
  Obj n;
  n.raw("ok", nv && nv->ok() ? "true" : "false");
  if (nv) n.put(nv->ok() ? "name" : "error", nv->ok() ? nv->name() : nv->error());
  return h.put("nvml", n);
}

int run_sweep(const Options& o, const Device& d) {
  std::vector<std::pair<int64_t, int64_t>> points;
  for (const auto& p : split(o.points)) {
    const auto x = p.find('x');
    points.emplace_back(std::stoll(p.substr(0, x)), std::stoll(p.substr(x + 1)));
  }
  std::stable_sort(points.begin(), points.end(), [](auto a, auto b) {
    return a.first * a.second * a.second < b.first * b.second * b.second;
  });
  strata::study::Nvml* nv = d.cuda ? &strata::study::Nvml::open() : nullptr;
  Doc doc{header(d, "sweep", nv), {}};
  Obj proto;
  proto.put("warmup", o.warmup).put("min_repeats", o.repeats.min_repeats).put("max_repeats", o.repeats.max_repeats);
  proto.put("min_seconds", o.repeats.min_seconds).put("h2d_repeats", o.h2d_repeats).put("deadline_s", o.deadline);
  doc.head.put("protocol", proto.put("lr", o.lr).put("seed", static_cast<double>(o.seed)));
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> oom_at;
  for (auto [b, r] : points)
    for (const auto& kind : split(o.kinds)) {
      Obj rec;
      auto& ooms = oom_at[kind];
      const bool big = std::any_of(ooms.begin(), ooms.end(), [&](auto q) { return b >= q.first && r >= q.second; });
      if (since_start_s() > o.deadline || big) {
        rec.put("impl", "libtorch").put("framework", "libtorch").put("kind", kind);
        rec.put("batch", static_cast<double>(b)).put("resolution", static_cast<double>(r));
        rec.put("status", big ? "oom" : "skipped");
        rec.put("note", big ? "not run: at least as large as a point that ran out of memory"
                            : "deadline: the part's time budget was spent");
      } else {
        rec = measure(o, d, nv, kind == "train", b, r);
        if (rec.str().find("\"status\": \"oom\"") != std::string::npos) ooms.emplace_back(b, r);
      }
      doc.records.push_back(rec.str());
      doc.write(o.json);
    }
  doc.head.put("elapsed_s", since_start_s());
  doc.write(o.json);
  return 0;
}

// --- parity --------------------------------------------------------------------------------
std::map<std::string, torch::Tensor> load_pt(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("study_libtorch: cannot read " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::map<std::string, torch::Tensor> out;
  for (const auto& kv : torch::pickle_load(bytes).toGenericDict())
    out[kv.key().toStringRef()] = kv.value().toTensor();
  return out;
}

int run_parity(const Options& o, const Device& d) {
  auto data = load_pt(o.data + "/parity_data.pt");
  auto init = load_pt(o.data + "/parity_init.pt");
  strata::study::Nvml* nv = d.cuda ? &strata::study::Nvml::open() : nullptr;
  Doc doc{header(d, "parity", nv), {}};
  Obj proto;
  proto.put("batch", o.batch).put("epochs", o.epochs).put("lr", o.parity_lr).put("momentum", 0.9);
  doc.head.put("protocol", proto);
  Obj rec;
  rec.put("impl", "libtorch").put("framework", "libtorch").put("kind", "parity").put("batch", o.batch);
  try {
    const auto t0 = Clock::now();
    study_libtorch::ResNet50 model;
    {
      torch::NoGradGuard ng;
      size_t loaded = 0;
      for (auto& p : model->named_parameters()) p.value().copy_(init.at(p.key())), ++loaded;
      for (auto& p : model->named_buffers()) p.value().copy_(init.at(p.key())), ++loaded;
      if (loaded != init.size())
        throw std::runtime_error("parity: init has " + std::to_string(init.size()) + " entries, the model " +
                                 std::to_string(loaded));
    }
    model->to(d.dev);
    model->train();
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(o.parity_lr).momentum(0.9));
    const torch::Tensor trx = data.at("train_x").to(d.dev), try_ = data.at("train_y").to(d.dev);
    const torch::Tensor tex = data.at("test_x").to(d.dev), tey = data.at("test_y").to(d.dev);
    rec.put("resolution", static_cast<double>(trx.size(2)));
    const int64_t steps = trx.size(0) / o.batch;
    std::string losses = "[";
    double last = NAN, first = NAN;
    for (int e = 0; e < o.epochs; ++e)
      for (int64_t s = 0; s < steps; ++s) {
        opt.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(
            model->forward(trx.narrow(0, s * o.batch, o.batch)), try_.narrow(0, s * o.batch, o.batch));
        loss.backward();
        opt.step();
        last = loss.item<double>();
        if (std::isnan(first)) first = last;
        losses += (losses.size() > 1 ? ", " : "") + num(last);
      }
    model->eval();
    torch::NoGradGuard ng;
    const int64_t used = tex.size(0) / o.batch * o.batch;
    double correct = 0, loss_sum = 0;
    for (int64_t s = 0; s < used; s += o.batch) {
      torch::Tensor logits = model->forward(tex.narrow(0, s, o.batch));
      torch::Tensor y = tey.narrow(0, s, o.batch);
      loss_sum += torch::nn::functional::cross_entropy(
                      logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                      .item<double>();
      correct += logits.argmax(1).eq(y).sum().item<double>();
    }
    rec.raw("losses", losses + "]").put("steps", static_cast<double>(steps * o.epochs)).put("train_loss_last", last);
    rec.put("test_samples", static_cast<double>(used)).put("test_acc", used ? correct / used : NAN);
    rec.put("test_loss", used ? loss_sum / used : NAN);
    rec.put("seconds", std::chrono::duration<double>(Clock::now() - t0).count()).put("status", "ok");
    std::printf("parity libtorch %lld steps  loss %.4f -> %.4f  test acc %.4f  test loss %.4f\n",
                static_cast<long long>(steps * o.epochs), first, last, used ? correct / used : NAN,
                used ? loss_sum / used : NAN);
  } catch (const std::exception& e) {
    rec.put("status", is_oom(e.what()) ? "oom" : "error").put("note", std::string(e.what()).substr(0, 2000));
    std::printf("parity libtorch %s\n", first_line(e.what()).c_str());
  }
  doc.records.push_back(rec.str());
  doc.write(o.json);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options parsed;
  try {
    parsed = parse(argc, argv);
  } catch (const std::exception& e) {
    // A bad command line (or a number std::stoi cannot read): status 2, as every strata
    // program (core/exit_status.h, which this program, built apart from strata, does not include).
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  try {
    const Options& o = parsed;
    Device d;
    d.cuda = o.device == "cuda";
#ifndef STUDY_WITH_CUDA
    if (d.cuda) throw std::runtime_error("study_libtorch: built without CUDA (LibTorch has no torch_cuda); use --device cpu");
#endif
    if (d.cuda && !torch::cuda::is_available()) throw std::runtime_error("study_libtorch: no CUDA device");
    d.dev = torch::Device(d.cuda ? torch::kCUDA : torch::kCPU);
    // strata's policy, as bench/peers/pytorch_resnet50.py's "eager" mode.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setBenchmarkCuDNN(false);
    at::globalContext().setDeterministicCuDNN(true);
    return o.cmd == "sweep" ? run_sweep(o, d) : run_parity(o, d);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
