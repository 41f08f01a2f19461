#pragma once
// ONNX models written by hand with ONNX's protobuf classes, for the import tests.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/random.h"

namespace strata::testing {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 17) {
    m_.set_ir_version(8);
    m_.set_producer_name("test");
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("g");
  }
  ::onnx::ModelProto& model() { return m_; }
  ::onnx::GraphProto& graph() { return *m_.mutable_graph(); }

  // dims: -1 is the symbolic "N".
  ::onnx::ValueInfoProto& input(const std::string& name, std::vector<int64_t> dims,
                                int elem = ::onnx::TensorProto::FLOAT) {
    return value(*graph().add_input(), name, dims, elem);
  }
  ::onnx::ValueInfoProto& output(const std::string& name, std::vector<int64_t> dims = {}) {
    return value(*graph().add_output(), name, dims, ::onnx::TensorProto::FLOAT);
  }
  // A FLOAT initializer with random values in [lo, hi).
  ::onnx::TensorProto& init(const std::string& name, const Shape& dims, double lo = -1, double hi = 1) {
    ::onnx::TensorProto& t = *graph().add_initializer();
    t.set_name(name);
    t.set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t.add_dims(d);
    const Tensor v = random_tensor(dims, DType::f32, ++seed_, lo, hi);
    t.set_raw_data(v.data_ptr(), v.nbytes());
    return t;
  }
  ::onnx::TensorProto& init_ints(const std::string& name, const std::vector<int64_t>& v) {
    ::onnx::TensorProto& t = *graph().add_initializer();
    t.set_name(name);
    t.set_data_type(::onnx::TensorProto::INT64);
    t.add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t.add_int64_data(x);
    return t;
  }
  ::onnx::NodeProto& node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                          const std::string& name = "") {
    ::onnx::NodeProto& n = *graph().add_node();
    n.set_op_type(op);
    n.set_name(name.empty() ? out.at(0) : name);
    for (auto& i : in) n.add_input(i);
    for (auto& o : out) n.add_output(o);
    return n;
  }
  std::string bytes() const { return m_.SerializeAsString(); }

 private:
  static ::onnx::ValueInfoProto& value(::onnx::ValueInfoProto& v, const std::string& name,
                                       const std::vector<int64_t>& dims, int elem) {
    v.set_name(name);
    auto* t = v.mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* s = t->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = s->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
    return v;
  }
  ::onnx::ModelProto m_;
  uint64_t seed_ = 100;
};

inline ::onnx::AttributeProto& attr(::onnx::NodeProto& n, const std::string& name) {
  ::onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  return a;
}
inline void set_ints(::onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
  auto& a = attr(n, name);
  a.set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
}
inline void set_int(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto& a = attr(n, name);
  a.set_type(::onnx::AttributeProto::INT);
  a.set_i(v);
}
inline void set_float(::onnx::NodeProto& n, const std::string& name, float v) {
  auto& a = attr(n, name);
  a.set_type(::onnx::AttributeProto::FLOAT);
  a.set_f(v);
}
inline void set_string(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto& a = attr(n, name);
  a.set_type(::onnx::AttributeProto::STRING);
  a.set_s(v);
}

inline void set_entry(::onnx::TensorProto& t, const std::string& key, const std::string& value) {
  auto* e = t.add_external_data();
  e->set_key(key);
  e->set_value(value);
}

// Moves the raw_data of the initializers `names` of m into the file `location` of `folder`
// (created, with its subfolders), in the order given, each at the next multiple of `align`
// (the gaps hold 0xAB), as ONNX's external data: data_location EXTERNAL, location, offset
// and length. The other initializers stay inline.
inline void move_to_external_file(::onnx::ModelProto& m, const std::filesystem::path& folder,
                                  const std::string& location, const std::vector<std::string>& names,
                                  size_t align = 64) {
  std::string data;
  for (const std::string& name : names) {
    ::onnx::TensorProto* t = nullptr;
    for (auto& i : *m.mutable_graph()->mutable_initializer())
      if (i.name() == name) t = &i;
    if (!t) throw std::runtime_error("move_to_external_file: no initializer " + name);
    data.resize((data.size() + align - 1) / align * align, '\xAB');
    set_entry(*t, "location", location);
    set_entry(*t, "offset", std::to_string(data.size()));
    set_entry(*t, "length", std::to_string(t->raw_data().size()));
    data += t->raw_data();
    t->clear_raw_data();
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
  }
  const std::filesystem::path path = folder / location;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

inline void save(const ::onnx::ModelProto& m, const std::filesystem::path& path) {
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
}

// x [N,3,8,8] -> Conv(4, 3x3, pad 1, bias) -> BatchNormalization -> Relu -> GlobalAveragePool
// -> Flatten -> Gemm(2, transB) -> y, with torch.onnx.export's kind of names.
inline OnnxBuilder tiny_model(int64_t opset = 17) {
  OnnxBuilder b(opset);
  b.input("x", {-1, 3, 8, 8});
  b.output("y", {-1, 2});
  b.init("conv.weight", {4, 3, 3, 3});
  b.init("conv.bias", {4});
  b.init("bn.weight", {4}, 0.5, 1.5);
  b.init("bn.bias", {4});
  b.init("bn.running_mean", {4}, -0.2, 0.2);
  b.init("bn.running_var", {4}, 0.5, 1.5);
  b.init("fc.weight", {2, 4});
  b.init("fc.bias", {2});
  auto& conv = b.node("Conv", {"x", "conv.weight", "conv.bias"}, {"c"}, "/conv/Conv");
  set_ints(conv, "kernel_shape", {3, 3});
  set_ints(conv, "pads", {1, 1, 1, 1});
  set_ints(conv, "strides", {1, 1});
  set_float(b.node("BatchNormalization", {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"n"},
                   "/bn/BatchNormalization"),
            "epsilon", 1e-5f);
  b.node("Relu", {"n"}, {"r"}, "/relu/Relu");
  b.node("GlobalAveragePool", {"r"}, {"g"}, "/pool/GlobalAveragePool");
  set_int(b.node("Flatten", {"g"}, {"f"}, "/Flatten"), "axis", 1);
  set_int(b.node("Gemm", {"f", "fc.weight", "fc.bias"}, {"y"}, "/fc/Gemm"), "transB", 1);
  return b;
}

}  // namespace strata::testing
