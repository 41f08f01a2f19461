#include "strata/codegen/onednn/support_files.h"

#include "strata/codegen/onednn/snippets.h"

namespace strata::codegen::onednn {

uint64_t fnv1a(const void* data, int64_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

namespace {
// The .npy reading and writing both programs share (checked shapes and dtypes, named errors).
const char* const kNpy = R"cg(#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model.h"

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + ")";
}

// The value of 'key' in a .npy header's dictionary, up to the character that ends it.
std::string header_field(const std::string& header, const std::string& key, char end, const std::string& path) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) throw std::runtime_error(path + ": .npy header has no '" + key + "': " + header);
  size_t v = header.find(':', k);
  if (v == std::string::npos) throw std::runtime_error(path + ": .npy header is malformed: " + header);
  ++v;
  while (v < header.size() && header[v] == ' ') ++v;
  const size_t e = header.find(end, v + 1);
  if (e == std::string::npos) throw std::runtime_error(path + ": .npy header is malformed: " + header);
  return header.substr(v, e - v + 1);
}

// T: float (float32, '<f4') or int64_t (int64, '<i8').
template <class T>
std::vector<T> read_npy(const std::string& path, const std::vector<int64_t>& want) {
  const bool f = sizeof(T) == 4;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be opened");
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error(path + ": not a NumPy .npy file");
  uint32_t len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  }
  std::string header(len, '\0');
  in.read(header.data(), len);
  if (!in) throw std::runtime_error(path + ": .npy header is cut short");
  const std::string descr = header_field(header, "descr", '\'', path);
  if (descr != (f ? "'<f4'" : "'<i8'") && descr != (f ? "'=f4'" : "'=i8'"))
    throw std::runtime_error(path + ": dtype " + descr + ", but the model takes " +
                             (f ? "float32 ('<f4')" : "int64 ('<i8')"));
  if (header_field(header, "fortran_order", 'e', path) != "False")
    throw std::runtime_error(path + ": Fortran order; the model takes C order (numpy.ascontiguousarray)");
  std::vector<int64_t> shape;
  std::stringstream dims(header_field(header, "shape", ')', path).substr(1));
  for (std::string d; std::getline(dims, d, ',');)
    if (d.find_first_of("0123456789") != std::string::npos) shape.push_back(std::stoll(d));
  if (shape != want)
    throw std::runtime_error(path + ": shape " + shape_str(shape) + ", but the model was generated for " +
                             shape_str(want));
  int64_t n = 1;
  for (int64_t d : want) n *= d;
  std::vector<T> v(static_cast<size_t>(n));
  const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
  if (in.gcount() != bytes)
    throw std::runtime_error(path + ": holds " + std::to_string(in.gcount()) + " bytes of data, the shape needs " +
                             std::to_string(bytes));
  return v;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  if (shape.size() == 1) header.insert(header.size() - 4, ",");
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 255),
                                static_cast<unsigned char>(header.size() >> 8)};
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  if (!out) throw std::runtime_error(path + ": could not be written");
}

}  // namespace
)cg";
}  // namespace

std::string model_cpp_prologue(const std::string& includes) {
  return R"cg(#include "model.h"

#include <dnnl.hpp>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <unordered_map>
)cg" + includes + R"cg(
#include "weights.h"

namespace generated {

namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using dt = memory::data_type;

)cg" + std::string(k_thread_rule) + "\n" + k_staging + R"cg(
// The threads a call's work is worth under the rule above, with the OpenMP pool this
// process has: oneDNN splits work by the team size it sees when it makes a primitive and
// when it runs it, so the results are bitwise those strata computes only with its rule.
int threads_of(int64_t units, int64_t grain) { return threads_for(Work{units, grain}, ScopedOmpThreads::max_threads()); }

// A weight or bias in the layout the primitive wants, re-laid out once here. oneDNN 2.6
// reorders into its Winograd weight layout from plain [K, C, R, S] only: other (versioned)
// weights go there through a plain copy.
memory constant(const memory::desc& user_md, const memory::desc& want, bool versioned, const void* data,
                const dnnl::engine& eng, dnnl::stream& strm) {
  memory user(user_md, eng, const_cast<void*>(data));
  if (want == user_md) return user;
  memory laid_out(want, eng);
  try {
    dnnl::reorder re(user, laid_out);
    re.execute(strm, user, laid_out);
  } catch (const dnnl::error&) {
    const memory::desc plain(user_md.dims(), user_md.data_type(), memory::format_tag::abcd);
    if (!versioned || user_md == plain) throw;
    memory staged(plain, eng);
    dnnl::reorder(user, staged).execute(strm, user, staged);
    dnnl::reorder(staged, laid_out).execute(strm, staged, laid_out);
  }
  strm.wait();
  return laid_out;
}

memory::desc any_like(const memory::desc& md) { return memory::desc(md.dims(), md.data_type(), memory::format_tag::any); }

// A convolution forward with oneDNN's choice of layouts; Winograd first where allowed (the
// direct algorithm where oneDNN has no Winograd kernel for the CPU or shape).
dnnl::convolution_forward::primitive_desc conv_pd(prop_kind prop, bool winograd, const memory::desc& src,
                                                  const memory::desc& wei, const memory::desc& bias,
                                                  const memory::desc& dst, const memory::dims& strides,
                                                  const memory::dims& dilates, const memory::dims& pad,
                                                  const dnnl::primitive_attr& attr, const dnnl::engine& eng) {
  auto make = [&](algorithm alg) {
    const dnnl::convolution_forward::desc d(prop, alg, any_like(src), any_like(wei),
                                            bias.is_zero() ? bias : any_like(bias), any_like(dst), strides, dilates,
                                            pad, pad);
    return dnnl::convolution_forward::primitive_desc(d, attr, eng);
  };
  if (winograd) {
    try {
      return make(algorithm::convolution_winograd);
    } catch (const dnnl::error&) {
    }
  }
  return make(algorithm::convolution_direct);
}

// The epilogue as post-ops: the residual as a sum into dst, then ReLU.
dnnl::primitive_attr post_ops(bool sum, bool relu) {
  dnnl::post_ops po;
  if (sum) po.append_sum(1.f);
  if (relu) po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

// A descriptor oneDNN may refuse (a view whose rows overlap the next ones' span).
std::optional<memory::desc> try_desc(const memory::dims& dims, const memory::dims& strides) {
  try {
    return memory::desc(dims, dt::f32, strides);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// One primitive call: its primitive, the arena buffers it reads and writes, its arguments,
// and for a convolution with a residual the reorder of the residual into its dst.
struct Call {
  dnnl::primitive prim;
  Staged src, dst;
  std::unordered_map<int, memory> args;
  memory z;
  dnnl::reorder z_into_dst;
  bool copies_z = false;
};

struct ArenaDeleter {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

}  // namespace
)cg";
}

std::string train_prologue() {
  return R"cg(
namespace {

// strata's own plain loops and dropout's mask, as they are (codegen/embed_snippets.cmake).
#define STRATA_HOST_DEVICE
// Each call's block below is a lambda kept out of line: many small functions compile several
// times faster than one of thousands of lines.
#if defined(__GNUC__)
#define OUT_OF_LINE __attribute__((noinline))
#else
#define OUT_OF_LINE
#endif
)cg" + std::string(k_dropout_rng) + "\n" + k_train_loops + R"cg(
// One primitive call of the training step: its inputs staged into the layouts the primitive
// chose (pulled at every call: a trained weight changes every step), its output pushed back;
// for max pooling's backward, the forward run first for the workspace.
struct TrainCall {
  dnnl::primitive prim, pre;
  std::vector<Staged> in;
  Staged out;
  std::unordered_map<int, memory> args, pre_args;
  bool has_pre = false;
  bool push = true;  // false: the output leaves the primitive's layout by a loop of strata's after run()
  void run(dnnl::stream& strm) {
    for (Staged& s : in) s.pull(strm);
    if (has_pre) pre.execute(strm, pre_args);
    prim.execute(strm, args);
    if (push) out.push(strm);
    strm.wait();
  }
};

}  // namespace
)cg";
}

std::string train_main_cpp() {
  return R"cg(// Trains the generated model: STEPS steps of SGD on one batch (a NumPy .npy input, float32,
// and its labels, int64, in the shapes the code was generated for), printing the loss of each
// step, then writes the state (parameters, gradients, momentum, dropout's counters).
//   model_train weights.bin input.npy labels.npy STEPS out_weights.bin
// Exit status: 0 done, 1 an error (said on stderr), 2 a usage error.
)cg" + std::string(kNpy) + R"cg(int main(int argc, char** argv) {
  const long steps = argc == 6 ? std::atol(argv[4]) : 0;
  if (argc != 6 || steps <= 0) {
    std::fprintf(stderr, "usage: %s WEIGHTS INPUT.npy LABELS.npy STEPS>0 OUT_WEIGHTS\n", argv[0]);
    return 2;
  }
  try {
    const std::vector<int64_t> in_shape(std::begin(generated::kInputSizes), std::end(generated::kInputSizes));
    const std::vector<int64_t> label_shape(std::begin(generated::kLabelSizes), std::end(generated::kLabelSizes));
    const std::vector<float> x = read_npy<float>(argv[2], in_shape);
    const std::vector<int64_t> labels = read_npy<int64_t>(argv[3], label_shape);
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] < 0 || labels[i] >= generated::kClasses)
        throw std::runtime_error(std::string(argv[3]) + ": label " + std::to_string(i) + " is " +
                                 std::to_string(labels[i]) + ", out of range [0, " +
                                 std::to_string(generated::kClasses) + ")");
    generated::Model model(argv[1]);
    for (long i = 0; i < steps; ++i)
      std::printf("step %ld loss %.9g\n", i + 1, static_cast<double>(model.train_step(x.data(), labels.data())));
    model.save(argv[5]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
}
)cg";
}

std::string weights_h() {
  return R"cg(#pragma once
// The weights file written beside this code: a 24-byte header (8 bytes of magic, the
// payload's size and its FNV-1a checksum, little-endian 64-bit) and the payload, every
// constant of the model at the offset model.cpp names.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace generated {

struct AlignedDeleter {
  void operator()(std::byte* p) const;
};

class Weights {
 public:
  // Throws std::runtime_error naming the file and what is wrong with it.
  // checksum 0: a training step's state, which changes at every step: any payload of the size
  // whose checksum is the one in its header.
  Weights(const std::string& path, int64_t payload_bytes, uint64_t checksum);
  const std::byte* data() const { return data_.get(); }
  std::byte* data() { return data_.get(); }
  // Writes the payload as it is now with its header (a training step's state).
  void save(const std::string& path) const;

 private:
  std::unique_ptr<std::byte[], AlignedDeleter> data_;
  int64_t bytes_ = 0;
};

}  // namespace generated
)cg";
}

std::string weights_cpp() {
  return R"cg(#include "weights.h"

#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>

namespace generated {

namespace {
constexpr char kMagic[8] = {'D', 'N', 'N', 'L', 'W', 'T', 'S', '1'};

uint64_t fnv1a(const std::byte* p, int64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
  return h;
}
}  // namespace

void AlignedDeleter::operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }

Weights::Weights(const std::string& path, int64_t payload_bytes, uint64_t checksum) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("weights file " + path + ": cannot be opened");
  char magic[8];
  uint64_t header[2] = {0, 0};
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(header), sizeof header);
  if (!in || std::memcmp(magic, kMagic, 8) != 0)
    throw std::runtime_error("weights file " + path + ": not a weights file of this generated code (bad header)");
  if (header[0] != static_cast<uint64_t>(payload_bytes) || (checksum != 0 && header[1] != checksum))
    throw std::runtime_error("weights file " + path + ": holds " + std::to_string(header[0]) +
                             " bytes of weights with another checksum; this code was generated with " +
                             std::to_string(payload_bytes) + " bytes (a weights file of another generation?)");
  data_.reset(new (std::align_val_t{64}) std::byte[static_cast<size_t>(payload_bytes > 0 ? payload_bytes : 1)]);
  in.read(reinterpret_cast<char*>(data_.get()), payload_bytes);
  if (in.gcount() != payload_bytes)
    throw std::runtime_error("weights file " + path + ": ends after " + std::to_string(in.gcount()) + " of " +
                             std::to_string(payload_bytes) + " payload bytes");
  if (fnv1a(data_.get(), payload_bytes) != header[1])
    throw std::runtime_error("weights file " + path + ": the payload's checksum does not match its header");
  bytes_ = payload_bytes;
}

void Weights::save(const std::string& path) const {
  const uint64_t header[2] = {static_cast<uint64_t>(bytes_), fnv1a(data_.get(), bytes_)};
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(kMagic, 8);
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  out.write(reinterpret_cast<const char*>(data_.get()), bytes_);
  out.close();
  if (!out) throw std::runtime_error("weights file " + path + ": could not be written");
}

}  // namespace generated
)cg";
}


std::string main_cpp() {
  return R"cg(// Runs the generated model on a tensor file: reads a NumPy .npy input (float32, C order,
// the shape the code was generated for), writes the output as .npy. With REPEAT, also runs
// the model that many more times and prints the median time of one run.
//   model_run weights.bin input.npy output.npy [REPEAT]
// Exit status: 0 done, 1 an error (said on stderr), 2 a usage error.
)cg" + std::string(kNpy) + R"cg(int main(int argc, char** argv) {
  const int repeat = argc == 5 ? std::atoi(argv[4]) : 0;
  if ((argc != 4 && argc != 5) || repeat < 0 || (argc == 5 && repeat == 0)) {
    std::fprintf(stderr, "usage: %s WEIGHTS INPUT.npy OUTPUT.npy [REPEAT > 0]\n", argv[0]);
    return 2;
  }
  try {
    const std::vector<int64_t> in_shape(std::begin(generated::kInputSizes), std::end(generated::kInputSizes));
    const std::vector<int64_t> out_shape(std::begin(generated::kOutputSizes), std::end(generated::kOutputSizes));
    const std::vector<float> x = read_npy<float>(argv[2], in_shape);
    generated::Model model(argv[1]);
    int64_t n = 1;
    for (int64_t d : out_shape) n *= d;
    std::vector<float> y(static_cast<size_t>(n));
    model.run(x.data(), y.data());
    write_npy(argv[3], out_shape, y);
    if (repeat > 0) {
      std::vector<double> ms;
      for (int i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        model.run(x.data(), y.data());
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf("time per run: %.3f ms median (min %.3f, max %.3f) over %d runs after 1\n", ms[ms.size() / 2],
                  ms.front(), ms.back(), repeat);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
}
)cg";
}

std::string cmake_lists(const std::string& project, const std::string& program) {
  return "# Generated by strata_codegen: builds the model as a static library and " + program + ", its\n"
         "# command-line program. Needs oneDNN (Debian: libdnnl-dev) and OpenMP only.\n"
         "cmake_minimum_required(VERSION 3.16)\n"
         "project(" + project + " LANGUAGES CXX)\n"
         "set(CMAKE_CXX_STANDARD 17)\n"
         "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n"
         "if(NOT CMAKE_BUILD_TYPE)\n"
         "  set(CMAKE_BUILD_TYPE Release)\n"
         "endif()\n"
         "find_package(dnnl CONFIG REQUIRED)\n"
         "find_package(OpenMP REQUIRED)\n"
         "add_library(model STATIC model.cpp weights.cpp)\n"
         "target_link_libraries(model PUBLIC DNNL::dnnl OpenMP::OpenMP_CXX)\n"
         "add_executable(" + program + " main.cpp)\n"
         "target_link_libraries(" + program + " PRIVATE model)\n";
}

}  // namespace strata::codegen::onednn
