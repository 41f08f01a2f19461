// nn::Gpt -> the ONNX graph that gpt_graph.h describes. Each node's output value has the
// node's name; names follow the state dict ("h.0.attn.c_attn" is that Linear's output).
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>

#include "strata/onnx/gpt_graph.h"
#include "strata/onnx/layer_access.h"

namespace strata::onnx::detail {

namespace {

class GptWriter {
 public:
  GptWriter(pb::GraphProto& g, const nn::GptConfig& c, const nn::StateDict* weights)
      : g_(g), c_(c), weights_(weights) {}

  void write(const GptIo& io) {
    const int64_t C = c_.n_embd, H = c_.n_head;
    g_.set_name("strata_gpt");
    pb::ValueInfoProto& in = *g_.add_input();
    set_type(in, io.input, pb::TensorProto::INT64, {dim("batch"), seq_dim(io)});
    pb::ValueInfoProto& out = *g_.add_output();
    set_type(out, io.output, pb::TensorProto::FLOAT, {dim("batch"), seq_dim(io), dim(c_.vocab_size)});

    // Constants every block shares.
    heads_ = ints("heads_shape", {0, 0, H, C / H});
    merged_ = ints("merged_shape", {0, 0, C});
    split_ = ints("qkv_split", {C, C, C});
    scale_ = scalar("attn_scale", static_cast<float>(1.0 / std::sqrt(static_cast<double>(C / H))));
    fill_ = scalar("causal_fill", -std::numeric_limits<float>::infinity());
    gelu_cubic_ = scalar("gelu_cubic", 0.044715f);
    gelu_scale_ = scalar("gelu_scale", static_cast<float>(std::sqrt(2.0 / std::numbers::pi)));
    one_ = scalar("one", 1.0f);
    half_ = scalar("half", 0.5f);

    // Positions 0..T-1 from the ids' shape, so the sequence length can stay open.
    const std::string shape = node("Shape", "ids_shape", {io.input});
    const std::string length = node("Gather", "sequence_length", {shape, ints("one_index", {1}, true)});
    set_int(last(), "axis", 0);
    const std::string positions = node("Range", "positions", {ints("zero", {0}, true), length, ints("step", {1}, true)});
    const std::string rows = node("Unsqueeze", "query_positions", {positions, ints("axis_1", {1})});
    const std::string cols = node("Unsqueeze", "key_positions", {positions, ints("axis_0", {0})});
    causal_ = node("GreaterOrEqual", "causal_mask", {rows, cols});

    wte_ = weight("wte.weight", {c_.vocab_size, C});
    const std::string tok = node("Gather", "wte", {wte_, io.input});
    set_int(last(), "axis", 0);
    const std::string pos = node("Gather", "wpe", {weight("wpe.weight", {c_.block_size, C}), positions});
    set_int(last(), "axis", 0);
    std::string x = node("Add", "embeddings", {tok, pos});
    for (int64_t i = 0; i < c_.n_layer; ++i) x = block("h." + std::to_string(i), x);
    x = layer_norm("ln_f", x);
    const std::string head = node("Transpose", "lm_head.weight_t", {wte_});
    set_ints(last(), "perm", {1, 0});
    node("MatMul", io.output, {x, head});
  }

 private:
  static pb::TensorShapeProto_Dimension dim(int64_t v) {
    pb::TensorShapeProto_Dimension d;
    d.set_dim_value(v);
    return d;
  }
  static pb::TensorShapeProto_Dimension dim(const char* param) {
    pb::TensorShapeProto_Dimension d;
    d.set_dim_param(param);
    return d;
  }
  static pb::TensorShapeProto_Dimension seq_dim(const GptIo& io) {
    return io.sequence > 0 ? dim(io.sequence) : dim("sequence");
  }
  static void set_type(pb::ValueInfoProto& v, const std::string& name, int32_t elem,
                       std::initializer_list<pb::TensorShapeProto_Dimension> dims) {
    v.set_name(name);
    pb::TypeProto_Tensor* t = v.mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    for (const auto& d : dims) *t->mutable_shape()->add_dim() = d;
  }
  static void set_int(pb::NodeProto& n, const char* name, int64_t v) {
    pb::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INT);
    a->set_i(v);
  }
  static void set_ints(pb::NodeProto& n, const char* name, std::initializer_list<int64_t> v) {
    pb::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  pb::NodeProto& last() { return *g_.mutable_node(g_.node_size() - 1); }

  std::string node(const char* op, const std::string& name, std::initializer_list<std::string> inputs,
                   std::initializer_list<std::string> outputs = {}) {
    pb::NodeProto* n = g_.add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& i : inputs) n->add_input(i);
    if (outputs.size() == 0) n->add_output(name);
    for (const std::string& o : outputs) n->add_output(o);
    return name;
  }

  pb::TensorProto& initializer(const std::string& name, int32_t type, const Shape& dims) {
    pb::TensorProto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    return *t;
  }
  std::string ints(const std::string& name, const std::vector<int64_t>& v, bool scalar = false) {
    pb::TensorProto& t = initializer(name, pb::TensorProto::INT64, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())});
    t.set_raw_data(v.data(), v.size() * sizeof(int64_t));
    return name;
  }
  std::string scalar(const std::string& name, float v) {
    initializer(name, pb::TensorProto::FLOAT, Shape{}).set_raw_data(&v, sizeof v);
    return name;
  }
  // A parameter: its data from the state dict when there is one (checked to be `sizes`).
  std::string weight(const std::string& name, const Shape& sizes) {
    pb::TensorProto& t = initializer(name, pb::TensorProto::FLOAT, sizes);
    if (weights_ == nullptr) return name;
    const Tensor* w = nn::find_entry(*weights_, name);
    STRATA_CHECK(w, "onnx export: the GPT's state dict has no '", name, "'");
    STRATA_CHECK(w->sizes() == sizes, "onnx export: the GPT's '", name, "' is ", w->sizes().str(),
                 " where its configuration makes it ", sizes.str());
    Tensor host = Tensor::empty(sizes, DType::f32);
    copy_into(*w, host);
    t.set_raw_data(host.data_ptr(), host.nbytes());
    return name;
  }

  std::string layer_norm(const std::string& m, const std::string& x) {
    node("LayerNormalization", m, {x, weight(m + ".weight", {c_.n_embd}), weight(m + ".bias", {c_.n_embd})});
    set_int(last(), "axis", -1);
    pb::AttributeProto* a = last().add_attribute();
    a->set_name("epsilon");
    a->set_type(pb::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(c_.layer_norm_eps));
    return m;
  }

  // strata's Linear: y = x W^T + b, W [out, in] as the state dict keeps it.
  std::string linear(const std::string& m, const std::string& x, int64_t in, int64_t out) {
    const std::string wt = node("Transpose", m + ".weight_t", {weight(m + ".weight", {out, in})});
    set_ints(last(), "perm", {1, 0});
    const std::string mm = node("MatMul", m + ".matmul", {x, wt});
    return node("Add", m, {mm, weight(m + ".bias", {out})});
  }

  // [B, T, C] -> heads [B, H, T, D], or [B, H, D, T] for the keys (transposed for q @ k^T).
  std::string heads(const std::string& name, const std::string& x, bool keys) {
    const std::string r = node("Reshape", name + "_heads", {x, heads_});
    node("Transpose", name, {r});
    if (keys)
      set_ints(last(), "perm", {0, 2, 3, 1});
    else
      set_ints(last(), "perm", {0, 2, 1, 3});
    return name;
  }

  std::string attention(const std::string& m, const std::string& x) {
    const int64_t C = c_.n_embd;
    const std::string qkv = linear(m + ".c_attn", x, C, 3 * C);
    node("Split", m + ".split", {qkv, split_}, {m + ".q", m + ".k", m + ".v"});
    set_int(last(), "axis", 2);
    const std::string q = heads(m + ".q_heads", m + ".q", false);
    const std::string k = heads(m + ".k_heads_t", m + ".k", true);
    const std::string v = heads(m + ".v_heads", m + ".v", false);
    const std::string s = node("MatMul", m + ".scores", {q, k});
    const std::string scaled = node("Mul", m + ".scaled", {s, scale_});
    const std::string masked = node("Where", m + ".masked", {causal_, scaled, fill_});
    const std::string p = node("Softmax", m + ".probs", {masked});
    set_int(last(), "axis", -1);
    const std::string o = node("MatMul", m + ".mix", {p, v});
    node("Transpose", m + ".mix_t", {o});
    set_ints(last(), "perm", {0, 2, 1, 3});
    const std::string y = node("Reshape", m + ".merged", {m + ".mix_t", merged_});
    return linear(m + ".c_proj", y, C, C);
  }

  // GPT-2's GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), op by op.
  std::string gelu(const std::string& m, const std::string& x) {
    const std::string sq = node("Mul", m + ".x2", {x, x});
    const std::string cube = node("Mul", m + ".x3", {sq, x});
    const std::string c = node("Mul", m + ".cubic", {cube, gelu_cubic_});
    const std::string inner = node("Add", m + ".inner", {x, c});
    const std::string scaled = node("Mul", m + ".inner_scaled", {inner, gelu_scale_});
    const std::string t = node("Tanh", m + ".tanh", {scaled});
    const std::string t1 = node("Add", m + ".tanh_1", {t, one_});
    const std::string h = node("Mul", m + ".half_x", {x, half_});
    return node("Mul", m, {h, t1});
  }

  std::string mlp(const std::string& m, const std::string& x) {
    const int64_t C = c_.n_embd;
    const std::string fc = linear(m + ".c_fc", x, C, 4 * C);
    return linear(m + ".c_proj", gelu(m + ".gelu", fc), 4 * C, C);
  }

  std::string block(const std::string& m, const std::string& x) {
    const std::string a = attention(m + ".attn", layer_norm(m + ".ln_1", x));
    const std::string h = node("Add", m + ".attn_residual", {x, a});
    const std::string f = mlp(m + ".mlp", layer_norm(m + ".ln_2", h));
    return node("Add", m + ".mlp_residual", {h, f});
  }

  pb::GraphProto& g_;
  const nn::GptConfig& c_;
  const nn::StateDict* weights_;
  std::string heads_, merged_, split_, scale_, fill_, gelu_cubic_, gelu_scale_, one_, half_, causal_, wte_;
};

}  // namespace

void write_gpt_graph(pb::GraphProto& g, const nn::GptConfig& c, const GptIo& io, const nn::StateDict* weights) {
  STRATA_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0, "onnx: GPT with n_embd ", c.n_embd, " and n_head ", c.n_head,
               " (n_embd must be a multiple of n_head)");
  GptWriter(g, c, weights).write(io);
}

std::optional<nn::GptConfig> gpt_config_of(const nn::Module& m) {
  std::optional<nn::GptConfig> c;
  visit_as<nn::Gpt>(m, [&](const auto& gpt) { c = gpt.config(); });
  return c;
}

std::string write_gpt_model(const nn::GptConfig& c, const nn::StateDict& weights, const GptIo& io,
                            const WriteInfo& info) {
  const DType compute = c.compute_dtype.value_or(c.dtype);
  STRATA_CHECK(c.dtype == DType::f32 && compute == DType::f32, "onnx export: the GPT keeps its parameters in ",
               dtype_name(c.dtype), " and computes in ", dtype_name(compute),
               "; strata exports f32 models (build the GPT with dtype f32 and no compute_dtype)");
  STRATA_CHECK(io.sequence <= c.block_size, "onnx export: a sequence of ", io.sequence,
               " tokens is longer than the GPT's block_size ", c.block_size);
  pb::ModelProto model;
  WriteInfo with_eps = info;
  char eps[32];
  std::snprintf(eps, sizeof eps, "%.17g", c.layer_norm_eps);
  with_eps.metadata.emplace_back(std::string(kGptEpsKey), eps);
  write_model_header(model, with_eps);
  write_gpt_graph(*model.mutable_graph(), c, io, &weights);
  return serialize_model(model);
}

}  // namespace strata::onnx::detail
