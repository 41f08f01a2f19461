// ir::Graph -> ONNX ModelProto bytes (opset 17, IR version 8: what ONNX 1.12 writes).
#include <bit>
#include <set>

#include "strata/onnx/convert.h"
#include "strata/onnx/onnx.h"
#include "strata/onnx/proto_fields.h"

namespace strata::onnx::detail {

namespace {

static_assert(std::endian::native == std::endian::little, "ONNX raw_data is little-endian");

void set_ints(pb::NodeProto& n, const char* name, std::initializer_list<int64_t> v) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void set_int(pb::NodeProto& n, const char* name, int64_t v) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INT);
  a->set_i(v);
}
void set_float(pb::NodeProto& n, const char* name, double v) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}

void set_type(pb::ValueInfoProto& v, const std::string& name, const Shape& sizes) {
  v.set_name(name);
  pb::TypeProto_Tensor* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(pb::TensorProto::FLOAT);
  pb::TensorShapeProto* s = t->mutable_shape();
  for (int i = 0; i < sizes.size(); ++i) {
    pb::TensorShapeProto_Dimension* d = s->add_dim();
    if (i == 0)
      d->set_dim_param("batch");
    else
      d->set_dim_value(sizes[i]);
  }
}

void set_pool(pb::NodeProto& p, const ops::Pool2dParams& w) {
  set_ints(p, "kernel_shape", {w.kernel_h, w.kernel_w});
  set_ints(p, "strides", {w.stride_h, w.stride_w});
  set_ints(p, "pads", {w.pad_h, w.pad_w, w.pad_h, w.pad_w});
}

class Writer {
 public:
  Writer(pb::GraphProto& out, const ir::Graph& g) : out_(out), g_(g) {}

  pb::NodeProto& node(const char* type, const std::string& name, std::vector<std::string> inputs,
                      const std::string& output) {
    pb::NodeProto* n = out_.add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return *n;
  }

  void write(const ir::Node& n, std::set<std::string>& names) {
    std::vector<std::string> in = n.inputs;
    in.insert(in.end(), n.params.begin(), n.params.end());
    switch (n.op) {
      case ir::Op::conv2d: {
        const Tensor& w = *ir::find_param(g_, n.params[0]);
        const ops::Conv2dParams& c = n.conv;
        pb::NodeProto& p = node("Conv", n.name, in, n.output);
        set_ints(p, "kernel_shape", {w.size(2), w.size(3)});
        set_ints(p, "strides", {c.stride_h, c.stride_w});
        set_ints(p, "pads", {c.pad_h, c.pad_w, c.pad_h, c.pad_w});
        set_ints(p, "dilations", {c.dilation_h, c.dilation_w});
        set_int(p, "group", c.groups);
        break;
      }
      case ir::Op::batch_norm: {
        pb::NodeProto& p = node("BatchNormalization", n.name, in, n.output);
        set_float(p, "epsilon", n.eps);
        set_float(p, "momentum", 1.0 - n.momentum);  // ONNX: running = running * momentum + batch * (1 - momentum)
        break;
      }
      case ir::Op::relu: node("Relu", n.name, in, n.output); break;
      case ir::Op::max_pool2d: set_pool(node("MaxPool", n.name, in, n.output), n.pool); break;
      case ir::Op::avg_pool2d: {
        pb::NodeProto& p = node("AveragePool", n.name, in, n.output);
        set_pool(p, n.pool);
        set_int(p, "count_include_pad", n.pool.count_include_pad ? 1 : 0);
        break;
      }
      case ir::Op::global_avg_pool: {
        // ONNX keeps the 1x1 spatial dims that strata's global_avg_pool drops.
        std::string pooled = n.output + "_4d";
        while (!names.insert(pooled).second) pooled += "_";
        node("GlobalAveragePool", n.name, in, pooled);
        set_int(node("Flatten", n.name + "_flatten", {pooled}, n.output), "axis", 1);
        break;
      }
      case ir::Op::flatten: set_int(node("Flatten", n.name, in, n.output), "axis", 1); break;
      case ir::Op::linear: set_int(node("Gemm", n.name, in, n.output), "transB", 1); break;
      case ir::Op::add: node("Add", n.name, in, n.output); break;
    }
  }

 private:
  pb::GraphProto& out_;
  const ir::Graph& g_;
};

}  // namespace

std::string write_model(const ir::Graph& g, const WriteInfo& info) {
  const std::map<std::string, Shape> shapes = ir::infer_shapes(g, [](const ir::Node& n, const std::string& why) {
    STRATA_FAIL("onnx export: module '", n.module.empty() ? "<root>" : n.module, "' (", ir::op_name(n.op),
                "): ", why);
  });
  pb::ModelProto model;
  write_model_header(model, info);
  pb::GraphProto& graph = *model.mutable_graph();
  graph.set_name("strata");

  std::set<std::string> names{g.input};
  for (const ir::Node& n : g.nodes) names.insert(n.output);
  set_type(*graph.add_input(), g.input, g.input_sizes);
  set_type(*graph.add_output(), g.output, shapes.at(g.output));

  for (const auto& [name, t] : g.initializers) {
    pb::TensorProto* p = graph.add_initializer();
    p->set_name(name);
    p->set_data_type(pb::TensorProto::FLOAT);
    for (int64_t d : t.sizes()) p->add_dims(d);
    p->set_raw_data(t.data_ptr(), t.nbytes());
  }
  Writer w(graph, g);
  for (const ir::Node& n : g.nodes) w.write(n, names);

  return serialize_model(model);
}

void write_model_header(pb::ModelProto& model, const WriteInfo& info) {
  model.set_ir_version(8);
  model.set_producer_name("strata");
  model.set_producer_version(STRATA_VERSION);
  model.set_doc_string(info.doc);
  pb::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  for (const auto& [k, v] : info.metadata) {
    pb::StringStringEntryProto* e = model.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
}

std::string serialize_model(const pb::ModelProto& model) {
  std::string bytes;
  STRATA_CHECK(model.SerializeToString(&bytes), "onnx export: protobuf could not serialise the model (",
               model.ByteSizeLong(), " bytes; protobuf's limit is 2 GiB)");
  return bytes;
}

}  // namespace strata::onnx::detail
