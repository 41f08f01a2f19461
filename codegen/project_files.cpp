#include "strata/codegen/project_files.h"

namespace strata::codegen {

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

std::string npy_helpers() { return kNpy; }

std::string range_check() {
  return R"cg(
// Each id (a label, a token) in [0, limit), else an error naming the file, the position and the value.
void check_range(const std::vector<int64_t>& ids, int64_t limit, const std::string& path, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= limit)
      throw std::runtime_error(path + ": " + what + " " + std::to_string(i) + " is " + std::to_string(ids[i]) +
                               ", out of range [0, " + std::to_string(limit) + ")");
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

std::string train_main_cpp(bool graph_switch, bool token_ids) {
  return std::string(token_ids ? R"cg(// Trains the generated model: STEPS steps of SGD on one batch (a NumPy .npy input of int64
// token ids in [0, kInputLimit), and its labels, the next ids, int64, in the shapes the code
// was generated for), printing the loss of each)cg"
                               : R"cg(// Trains the generated model: STEPS steps of SGD on one batch (a NumPy .npy input, float32,
// and its labels, int64, in the shapes the code was generated for), printing the loss of each)cg") +
         R"cg(
// step, then writes the state (parameters, gradients, momentum, dropout's counters).
//   model_train weights.bin input.npy labels.npy STEPS out_weights.bin [--time])cg" +
         std::string(graph_switch ? " [--no-graph]\n// --no-graph runs the step's calls one by one instead of "
                                    "the CUDA graph captured at load." : "") +
         R"cg(
// --time also prints the median time of one step after the first (the batch copied in, the loss
// copied out), as strata_codegen --train --time times strata's own.
// Exit status: 0 done, 1 an error (said on stderr), 2 a usage error.
)cg" + npy_helpers() + range_check() + "constexpr bool kGraphSwitch = " + (graph_switch ? "true" : "false") + ";\n" +
         (graph_switch ? "std::unique_ptr<generated::Model> make_model(const char* path, bool graph) {\n"
                         "  return std::make_unique<generated::Model>(path, graph);\n}\n"
                       : "std::unique_ptr<generated::Model> make_model(const char* path, bool) {\n"
                         "  return std::make_unique<generated::Model>(path);\n}\n") +
         R"cg(int main(int argc, char** argv) {
  bool graph = true, timed = false;
  std::vector<const char*> args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (kGraphSwitch && std::string(argv[i]) == "--no-graph")
      graph = false;
    else if (std::string(argv[i]) == "--time")
      timed = true;
    else
      args.push_back(argv[i]);
  }
  argc = static_cast<int>(args.size());
  argv = const_cast<char**>(args.data());
  const long steps = argc == 6 ? std::atol(argv[4]) : 0;
  if (argc != 6 || steps <= 0) {
    std::fprintf(stderr, "usage: %s WEIGHTS INPUT.npy LABELS.npy STEPS>0 OUT_WEIGHTS [--time]%s\n", argv[0],
                 kGraphSwitch ? " [--no-graph]" : "");
    return 2;
  }
  try {
    const std::vector<int64_t> in_shape(std::begin(generated::kInputSizes), std::end(generated::kInputSizes));
    const std::vector<int64_t> label_shape(std::begin(generated::kLabelSizes), std::end(generated::kLabelSizes));
)cg" + (token_ids ? "    const std::vector<int64_t> x = read_npy<int64_t>(argv[2], in_shape);\n"
                               "    check_range(x, generated::kInputLimit, argv[2], \"token\");\n"
                             : "    const std::vector<float> x = read_npy<float>(argv[2], in_shape);\n") +
         R"cg(    const std::vector<int64_t> labels = read_npy<int64_t>(argv[3], label_shape);
    check_range(labels, generated::kClasses, argv[3], "label");
    const std::unique_ptr<generated::Model> model = make_model(argv[1], graph);
    std::vector<double> ms;
    for (long i = 0; i < steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const float loss = model->train_step(x.data(), labels.data());
      if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      std::printf("step %ld loss %.9g\n", i + 1, static_cast<double>(loss));
    }
    if (timed && !ms.empty()) {
      std::sort(ms.begin(), ms.end());
      std::printf("time per step: %.3f ms median (min %.3f, max %.3f) over %zu steps after 1\n", ms[ms.size() / 2],
                  ms.front(), ms.back(), ms.size());
    }
    model->save(argv[5]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
}
)cg";
}

}  // namespace strata::codegen
