#pragma once
// Internal to onnx/ (with gpt_graph.h, the only headers that include ONNX's protobuf
// classes): tensor data and node attributes of an ONNX file, read defensively. Nothing here trusts the file:
// sizes are checked against the bytes actually present before anything is allocated.
#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/onnx/convert.h"
#include "strata/onnx/external_data.h"

namespace strata::onnx::detail {

namespace pb = ::onnx;

// The contents of a TensorProto: f32 data (FLOAT) or i64 values (INT64, BOOL as 0/1), or
// why neither. Data kept in an external file is read through `external`.
struct TensorData {
  Tensor f32;                 // FLOAT: CPU, contiguous
  std::vector<int64_t> i64;   // INT64
  bool is_i64 = false;
  std::string problem;        // non-empty: the tensor cannot be used
};
TensorData read_tensor(const pb::TensorProto& t, ExternalData& external);
// "FLOAT", "INT64", ... for messages.
std::string data_type_name(int32_t data_type);

// A node's attributes, each read at most once with its default; finish() reports every
// attribute no reader asked for. A wrongly typed attribute is reported and its default used.
class Attrs {
 public:
  using Report = std::function<void(const std::string&)>;
  Attrs(const pb::NodeProto& n, Report report);
  bool has(const std::string& name) const { return by_name_.count(name) > 0; }
  int64_t i(const std::string& name, int64_t def);
  double f(const std::string& name, double def);
  std::string s(const std::string& name, const std::string& def);
  std::vector<int64_t> ints(const std::string& name, std::vector<int64_t> def);
  const pb::TensorProto* tensor(const std::string& name);
  void finish();

 private:
  const pb::AttributeProto* take(const std::string& name, pb::AttributeProto::AttributeType type);
  std::map<std::string, const pb::AttributeProto*> by_name_;
  Report report_;
};

// Writing (proto_write.cpp): the model-level fields of every file strata writes (IR
// version 8, producer, opset kOpset, doc and metadata), and the model's bytes.
void write_model_header(pb::ModelProto& model, const WriteInfo& info);
std::string serialize_model(const pb::ModelProto& model);

}  // namespace strata::onnx::detail
