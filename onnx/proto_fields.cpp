#include "strata/onnx/proto_fields.h"

#include <bit>
#include <cstring>

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

TensorData read_tensor(const pb::TensorProto& t) {
  static_assert(std::endian::native == std::endian::little, "ONNX raw_data is little-endian");
  TensorData out;
  auto fail = [&](std::string why) {
    out.problem = std::move(why);
    return out;
  };
  if (t.data_location() == pb::TensorProto::EXTERNAL)
    return fail("keeps its data in an external file; strata reads self-contained models "
                "(onnx.save_model(model, path, save_as_external_data=False))");
  if (t.has_segment()) return fail("is segmented; strata reads whole tensors");
  if (t.dims_size() > kMaxDims) return fail("has " + std::to_string(t.dims_size()) + " dimensions (at most 6)");
  Shape dims;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > kMaxDim) return fail("has a dimension of " + std::to_string(d));
    dims.push_back(d);
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxDim) return fail("has too many elements " + dims.str());
  }
  const bool raw = t.has_raw_data();
  const size_t raw_size = t.raw_data().size();
  switch (t.data_type()) {
    case pb::TensorProto::FLOAT: {
      const size_t given = raw ? raw_size / 4 : static_cast<size_t>(t.float_data_size());
      if ((raw && raw_size % 4 != 0) || given != static_cast<size_t>(n))
        return fail("holds " + std::to_string(raw ? raw_size : given) + (raw ? " bytes" : " values") + " for " +
                    dims.str() + " FLOAT (" + std::to_string(n) + " values)");
      out.f32 = Tensor::empty(dims, DType::f32);
      if (n == 0) return out;
      if (raw)
        std::memcpy(out.f32.data_ptr(), t.raw_data().data(), raw_size);
      else
        std::memcpy(out.f32.data_ptr(), t.float_data().data(), static_cast<size_t>(n) * 4);
      return out;
    }
    case pb::TensorProto::INT64: {
      const size_t given = raw ? raw_size / 8 : static_cast<size_t>(t.int64_data_size());
      if ((raw && raw_size % 8 != 0) || given != static_cast<size_t>(n))
        return fail("holds " + std::to_string(raw ? raw_size : given) + (raw ? " bytes" : " values") + " for " +
                    dims.str() + " INT64 (" + std::to_string(n) + " values)");
      out.is_i64 = true;
      out.i64.resize(static_cast<size_t>(n));
      if (n == 0) return out;
      if (raw)
        std::memcpy(out.i64.data(), t.raw_data().data(), raw_size);
      else
        std::memcpy(out.i64.data(), t.int64_data().data(), static_cast<size_t>(n) * 8);
      return out;
    }
    case pb::TensorProto::BOOL: {  // as 0/1 integers (Dropout's training_mode)
      const size_t given = raw ? raw_size : static_cast<size_t>(t.int32_data_size());
      if (given != static_cast<size_t>(n))
        return fail("holds " + std::to_string(given) + " values for " + dims.str() + " BOOL");
      out.is_i64 = true;
      for (int64_t i = 0; i < n; ++i)
        out.i64.push_back(raw ? static_cast<uint8_t>(t.raw_data()[static_cast<size_t>(i)]) != 0
                              : t.int32_data(static_cast<int>(i)) != 0);
      return out;
    }
    default:
      return fail("has data type " + data_type_name(t.data_type()) + " (strata reads FLOAT, INT64 and BOOL)");
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
