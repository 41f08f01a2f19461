#include "strata/nn/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "strata/core/file.h"

namespace strata::nn::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts would need byte swapping here");

namespace {

// The reference implementation refuses headers above 100 MB; so does strata.
constexpr uint64_t kMaxHeader = 100'000'000;

std::string errno_text() { return std::strerror(errno); }

Tensor host_dense(const Tensor& t) {
  if (t.device().is_cpu() && t.is_contiguous()) return t;
  Tensor h = Tensor::empty(t.sizes(), t.dtype(), Device::cpu());
  copy_into(t, h);
  return h;
}

}  // namespace

std::string_view dtype_code(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i64: return "I64";
    case DType::i32: return "I32";
    case DType::u8: return "U8";
  }
  return "?";
}

DType parse_dtype_code(std::string_view code, std::string_view where) {
  if (code == "F32") return DType::f32;
  if (code == "F64") return DType::f64;
  if (code == "F16") return DType::f16;
  if (code == "BF16") return DType::bf16;
  if (code == "I64") return DType::i64;
  if (code == "I32") return DType::i32;
  if (code == "U8") return DType::u8;
  STRATA_FAIL("safetensors: ", where, ": unknown or unsupported dtype \"", code,
              "\" (strata reads F32, F64, F16, BF16, I64, I32, U8)");
}

StateDict to_host(const StateDict& tensors) {
  StateDict out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.defined() ? host_dense(t) : t);
  return out;
}

std::string serialize(const StateDict& tensors, const Metadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> hosts;
  uint64_t offset = 0;
  // Larger elements first keeps every tensor aligned to its element size (as the
  // reference writer does); stable, so names keep their order within a size.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].second.dtype()) > dtype_size(tensors[b].second.dtype());
  });
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    STRATA_CHECK(t.defined(), "safetensors: tensor '", name, "' is undefined");
    STRATA_CHECK(name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
    STRATA_CHECK(!header.contains(name), "safetensors: two tensors named '", name, "'");
    const uint64_t bytes = t.nbytes();
    nlohmann::ordered_json entry;
    entry["dtype"] = dtype_code(t.dtype());
    entry["shape"] = std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
    entry["data_offsets"] = {offset, offset + bytes};
    header[name] = entry;
    offset += bytes;
    hosts.push_back(host_dense(t));
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += json;
  for (const Tensor& h : hosts) out.append(static_cast<const char*>(h.data_ptr()), h.nbytes());
  return out;
}

Contents parse(std::string_view bytes, std::string_view source) {
  const std::string src(source);
  STRATA_CHECK(bytes.size() >= 8, "safetensors: ", src, ": file of ", bytes.size(),
               " bytes is too short for the 8-byte header length (truncated?)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  STRATA_CHECK(n <= kMaxHeader, "safetensors: ", src, ": header length ", n, " exceeds the 100 MB limit (corrupt?)");
  STRATA_CHECK(n <= bytes.size() - 8, "safetensors: ", src, ": header length ", n, " runs past the end of the ",
               bytes.size(), "-byte file (truncated or corrupt)");
  STRATA_CHECK(n >= 2, "safetensors: ", src, ": header length ", n, " is too small for a JSON object");
  const std::string_view json_text = bytes.substr(8, n);
  const std::string_view data = bytes.substr(8 + n);

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    STRATA_FAIL("safetensors: ", src, ": header is not valid JSON (", e.what(), ")");
  }
  STRATA_CHECK(header.is_object(), "safetensors: ", src, ": header is not a JSON object");

  Contents out;
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  struct Pending {
    std::string name;
    DType dt;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Pending> pending;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      STRATA_CHECK(v.is_object(), "safetensors: ", src, ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        STRATA_CHECK(m.value().is_string(), "safetensors: ", src, ": __metadata__ value of '", m.key(),
                     "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = src + ": tensor '" + name + "'";
    STRATA_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                 "safetensors: ", where, " needs dtype, shape and data_offsets");
    STRATA_CHECK(v["dtype"].is_string(), "safetensors: ", where, ": dtype is not a string");
    const DType dt = parse_dtype_code(v["dtype"].get<std::string>(), where);
    const nlohmann::json& shape = v["shape"];
    STRATA_CHECK(shape.is_array() && shape.size() <= static_cast<size_t>(kMaxDims), "safetensors: ", where,
                 ": shape must be an array of at most ", kMaxDims, " sizes");
    Shape s;
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : shape) {
      STRATA_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0), "safetensors: ",
                   where, ": shape entries must be non-negative integers");
      const uint64_t x = d.get<uint64_t>();
      STRATA_CHECK(x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "safetensors: ", where,
                   ": shape entry ", x, " too large");
      if (x != 0 && numel > std::numeric_limits<uint64_t>::max() / x) overflow = true;
      numel *= x;
      s.push_back(static_cast<int64_t>(x));
    }
    STRATA_CHECK(!overflow && numel <= std::numeric_limits<uint64_t>::max() / dtype_size(dt), "safetensors: ", where,
                 ": shape ", s.str(), " overflows");
    const nlohmann::json& off = v["data_offsets"];
    STRATA_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
                 "safetensors: ", where, ": data_offsets must be two non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    STRATA_CHECK(b <= e, "safetensors: ", where, ": data_offsets [", b, ", ", e, "] are reversed");
    STRATA_CHECK(e <= data.size(), "safetensors: ", where, ": data_offsets [", b, ", ", e,
                 "] reach past the data area of ", data.size(), " bytes (truncated or corrupt)");
    STRATA_CHECK(e - b == numel * dtype_size(dt), "safetensors: ", where, ": data_offsets [", b, ", ", e, "] hold ",
                 e - b, " bytes but ", dtype_code(dt), s.str(), " needs ", numel * dtype_size(dt));
    spans.push_back({b, e, name});
    pending.push_back({name, dt, s, b, e});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    STRATA_CHECK(spans[i].begin >= spans[i - 1].end || spans[i].begin == spans[i].end ||
                     spans[i - 1].begin == spans[i - 1].end,
                 "safetensors: ", src, ": tensors '", spans[i - 1].name, "' [", spans[i - 1].begin, ", ",
                 spans[i - 1].end, ") and '", spans[i].name, "' [", spans[i].begin, ", ", spans[i].end,
                 ") overlap");

  std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) { return a.begin < b.begin; });
  for (const Pending& p : pending) {
    Tensor t = Tensor::empty(p.shape, p.dt, Device::cpu());
    if (p.end > p.begin) std::memcpy(t.data_ptr(), data.data() + p.begin, p.end - p.begin);
    out.tensors.emplace_back(p.name, std::move(t));
  }
  return out;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  STRATA_CHECK(fd >= 0, "safetensors: cannot create '", tmp, "': ", errno_text());
  auto fail = [&](const char* what) {
    const std::string why = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    STRATA_FAIL("safetensors: ", what, " '", tmp, "' failed: ", why, " (", path, " is unchanged)");
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("writing");
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) fail("fsync of");
  if (::close(fd) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    STRATA_FAIL("safetensors: closing '", tmp, "' failed: ", why, " (", path, " is unchanged)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    STRATA_FAIL("safetensors: renaming '", tmp, "' to '", path, "' failed: ", why);
  }
  // The rename is durable only once the directory entry is.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  // Temporaries of saves whose process died (SIGKILL, a crash) are never read.
  remove_stale_temporaries(path, std::chrono::minutes(1));
}

void save(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  write_file_atomic(path, serialize(tensors, metadata));
}

Contents load(const std::string& path) {
  const std::vector<uint8_t> bytes = read_regular_file(path);
  return parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

}  // namespace strata::nn::safetensors
