#include "strata/onnx/proto_fields.h"

#include <bit>
#include <cstring>
#include <new>
#include <optional>

#include "strata/core/file.h"

namespace strata::onnx::detail {

namespace {
// Far beyond any real network's tensor; keeps every product below int64 overflow.
constexpr int64_t kMaxDim = int64_t{1} << 40;
}  // namespace

std::string data_type_name(int32_t t) {
  static const char* const kNames[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",   "UINT16",    "INT16",
                                       "INT32",     "INT64",  "STRING", "BOOL",   "FLOAT16",   "DOUBLE",
                                       "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (t >= 0 && t < static_cast<int32_t>(std::size(kNames))) return kNames[t];
  return "data type " + std::to_string(t);
}

namespace {

// Bytes per element of the types read, 0 for the others.
size_t element_bytes(int32_t data_type) {
  switch (data_type) {
    case pb::TensorProto::FLOAT: return 4;
    case pb::TensorProto::INT64: return 8;
    case pb::TensorProto::BOOL: return 1;
    default: return 0;
  }
}

// Values given in the typed field that holds the type's data.
size_t typed_values(const pb::TensorProto& t) {
  switch (t.data_type()) {
    case pb::TensorProto::FLOAT: return static_cast<size_t>(t.float_data_size());
    case pb::TensorProto::INT64: return static_cast<size_t>(t.int64_data_size());
    case pb::TensorProto::BOOL: return static_cast<size_t>(t.int32_data_size());
    default: return 0;
  }
}

}  // namespace

TensorData read_tensor(const pb::TensorProto& t, ExternalData& external) {
  static_assert(std::endian::native == std::endian::little, "ONNX raw_data is little-endian");
  TensorData out;
  auto fail = [&](std::string why) {
    out.problem = std::move(why);
    return out;
  };
  if (t.has_segment()) return fail("is segmented; strata reads whole tensors");
  if (t.dims_size() > kMaxDims) return fail("has " + std::to_string(t.dims_size()) + " dimensions (at most 6)");
  Shape dims;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > kMaxDim) return fail("has a dimension of " + std::to_string(d));
    dims.push_back(d);
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxDim) return fail("has too many elements " + dims.str());
  }
  const size_t elem = element_bytes(t.data_type());
  if (elem == 0)
    return fail("has data type " + data_type_name(t.data_type()) + " (strata reads FLOAT, INT64 and BOOL)");
  const std::string what = dims.str() + " " + data_type_name(t.data_type());
  const size_t bytes = static_cast<size_t>(n) * elem;

  // Where the bytes are: an external file, raw_data, or the type's own field. Each is
  // checked to hold exactly the tensor before anything is allocated.
  const bool is_external = t.data_location() == pb::TensorProto::EXTERNAL;
  std::optional<ExternalRange> ext;
  const bool raw = t.has_raw_data();
  const size_t raw_size = t.raw_data().size();
  if (is_external) {
    if (raw || typed_values(t) > 0) return fail("keeps its data in an external file and in the model too");
    ExternalEntries entries;
    for (const auto& e : t.external_data()) entries.emplace_back(e.key(), e.value());
    try {
      ext = external.locate(entries, bytes);
    } catch (const Error& e) {
      return fail(what + " in external data: " + e.what());
    }
  } else if (t.external_data_size() > 0) {
    return fail("has external_data entries but data_location DEFAULT (is the model damaged?)");
  } else if (raw ? raw_size != bytes : typed_values(t) != static_cast<size_t>(n)) {
    return fail("holds " + std::to_string(raw ? raw_size : typed_values(t)) + (raw ? " bytes" : " values") + " for " +
                what + " (" + std::to_string(n) + " values)");
  }
  // The tensor's bytes as in raw_data, little-endian.
  auto fill = [&](void* dst) {
    if (bytes == 0) return;
    if (ext)
      read_file_range(ext->file, ext->offset, std::span<uint8_t>(static_cast<uint8_t*>(dst), bytes));
    else if (raw)
      std::memcpy(dst, t.raw_data().data(), bytes);
    else if (t.data_type() == pb::TensorProto::FLOAT)
      std::memcpy(dst, t.float_data().data(), bytes);
    else if (t.data_type() == pb::TensorProto::INT64)
      std::memcpy(dst, t.int64_data().data(), bytes);
    else
      for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(dst)[i] = t.int32_data(static_cast<int>(i)) != 0;
  };
  try {
    switch (t.data_type()) {
      case pb::TensorProto::FLOAT:
        out.f32 = Tensor::empty(dims, DType::f32);
        fill(out.f32.data_ptr());
        return out;
      case pb::TensorProto::INT64:
        out.is_i64 = true;
        out.i64.resize(static_cast<size_t>(n));
        fill(out.i64.data());
        return out;
      default: {  // BOOL, as 0/1 integers (Dropout's training_mode)
        std::vector<uint8_t> b(bytes);
        fill(b.data());
        out.is_i64 = true;
        for (uint8_t v : b) out.i64.push_back(v != 0);
        return out;
      }
    }
  } catch (const Error& e) {  // out of memory, or the external file changed since it was checked
    out = TensorData();
    return fail(what + (ext ? " in external data: " : ": ") + e.what());
  } catch (const std::bad_alloc&) {
    out = TensorData();
    return fail(what + ": " + std::to_string(bytes) + " bytes do not fit in memory");
  }
}

Attrs::Attrs(const pb::NodeProto& n, Report report) : report_(std::move(report)) {
  for (const pb::AttributeProto& a : n.attribute())
    if (!by_name_.emplace(a.name(), &a).second) report_("attribute '" + a.name() + "' is given twice");
}

const pb::AttributeProto* Attrs::take(const std::string& name, pb::AttributeProto::AttributeType type) {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return nullptr;
  const pb::AttributeProto* a = it->second;
  by_name_.erase(it);
  if (!a->ref_attr_name().empty()) {
    report_("attribute '" + name + "' refers to a function attribute ('" + a->ref_attr_name() + "')");
    return nullptr;
  }
  if (a->type() != type) {
    report_("attribute '" + name + "' has type " + pb::AttributeProto::AttributeType_Name(a->type()) + ", not " +
            pb::AttributeProto::AttributeType_Name(type));
    return nullptr;
  }
  return a;
}

int64_t Attrs::i(const std::string& name, int64_t def) {
  const auto* a = take(name, pb::AttributeProto::INT);
  return a ? a->i() : def;
}

double Attrs::f(const std::string& name, double def) {
  const auto* a = take(name, pb::AttributeProto::FLOAT);
  return a ? a->f() : def;
}

std::string Attrs::s(const std::string& name, const std::string& def) {
  const auto* a = take(name, pb::AttributeProto::STRING);
  return a ? a->s() : def;
}

std::vector<int64_t> Attrs::ints(const std::string& name, std::vector<int64_t> def) {
  const auto* a = take(name, pb::AttributeProto::INTS);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : def;
}

const pb::TensorProto* Attrs::tensor(const std::string& name) {
  const auto* a = take(name, pb::AttributeProto::TENSOR);
  return a ? &a->t() : nullptr;
}

void Attrs::finish() {
  for (const auto& [name, a] : by_name_) report_("attribute '" + name + "' is not supported");
  by_name_.clear();
}

}  // namespace strata::onnx::detail
