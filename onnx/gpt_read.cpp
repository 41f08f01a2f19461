// An ONNX graph with INT64 token ids -> nn::Gpt's configuration and weights. The
// configuration comes from the file (vocabulary and width from the token embedding, context
// from the position embedding, layers from the layer norms, heads from the head split, the
// layer norms' epsilon); the graph gpt_graph.h describes is then written for it and the file
// must be that graph node for node. A file that differs anywhere is refused at the first
// difference, named, never imported approximately.
#include <cstring>
#include <set>

#include "strata/onnx/gpt_graph.h"

namespace strata::onnx::detail {

namespace {

std::string dims_str(const pb::TensorProto& t) {
  Shape s;
  for (int64_t d : t.dims()) s.push_back(d);
  return s.str() + " " + data_type_name(t.data_type());
}

std::string attr_str(const pb::AttributeProto& a) {
  switch (a.type()) {
    case pb::AttributeProto::INT: return std::to_string(a.i());
    case pb::AttributeProto::FLOAT: return std::to_string(a.f());
    case pb::AttributeProto::INTS: {
      std::string s = "[";
      for (int i = 0; i < a.ints_size(); ++i) s += (i ? "," : "") + std::to_string(a.ints(i));
      return s + "]";
    }
    default: return "(an attribute of type " + std::to_string(static_cast<int>(a.type())) + ")";
  }
}

bool same_attr(const pb::AttributeProto& a, const pb::AttributeProto& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case pb::AttributeProto::INT: return a.i() == b.i();
    case pb::AttributeProto::FLOAT: {
      const float x = a.f(), y = b.f();
      return std::memcmp(&x, &y, sizeof x) == 0;  // bit for bit: the epsilon becomes the model's
    }
    case pb::AttributeProto::INTS:
      return std::equal(a.ints().begin(), a.ints().end(), b.ints().begin(), b.ints().end());
    default: return a.SerializeAsString() == b.SerializeAsString();
  }
}

class GptReader {
 public:
  GptReader(const pb::GraphProto& g, const std::map<std::string, std::string>& metadata, ExternalData& external,
            std::string_view source)
      : g_(g), metadata_(metadata), external_(external), source_(source) {}

  GptRead read() {
    STRATA_CHECK(g_.sparse_initializer_size() == 0, prefix(), "the graph has sparse initializers (not supported)");
    for (const pb::TensorProto& t : g_.initializer())
      STRATA_CHECK(file_init_.emplace(t.name(), &t).second, prefix(), "initializer '", t.name(), "' is defined twice");
    GptRead r;
    read_io(r.io);
    r.config = infer_config(r.io);
    pb::GraphProto want;
    write_gpt_graph(want, r.config, r.io, nullptr);
    for (const pb::TensorProto& t : want.initializer()) want_init_.emplace(t.name(), &t);
    match(want);
    r.weights = weights(want);
    return r;
  }

 private:
  std::string prefix() const { return "onnx import " + source_ + ": "; }
  std::string not_gpt() const {
    return prefix() + "the graph reads INT64 token ids, which strata imports as the GPT it exports, but ";
  }

  // The one input (INT64 [batch, sequence]) and the one output (FLOAT [batch, sequence, vocab]).
  void read_io(GptIo& io) {
    const pb::ValueInfoProto* in = nullptr;
    for (const pb::ValueInfoProto& v : g_.input())
      if (!file_init_.count(v.name())) in = &v;
    const auto& shape = in->type().tensor_type().shape();  // of rank 2 (reads_token_ids)
    if (shape.dim(1).has_dim_value()) {
      io.sequence = shape.dim(1).dim_value();
      STRATA_CHECK(io.sequence > 0, prefix(), "input '", in->name(), "' has a sequence length of ", io.sequence);
    }
    STRATA_CHECK(g_.output_size() == 1, not_gpt(), "it has ", g_.output_size(), " outputs (a GPT gives its logits)");
    io.input = in->name();
    io.output = g_.output(0).name();
    STRATA_CHECK(io.input != io.output, prefix(), "the graph's input is its output");
  }

  const pb::TensorProto* rank2_f32(const std::string& name) const {
    auto it = file_init_.find(name);
    if (it == file_init_.end() || it->second->data_type() != pb::TensorProto::FLOAT || it->second->dims_size() != 2)
      return nullptr;
    return it->second;
  }

  nn::GptConfig infer_config(const GptIo& io) {
    nn::GptConfig c;
    const pb::TensorProto *wte = nullptr, *wpe = nullptr;
    int layer_norms = 0;
    const pb::NodeProto* first_ln = nullptr;
    for (const pb::NodeProto& n : g_.node()) {
      if (n.op_type() == "Gather" && n.input_size() == 2) {
        const pb::TensorProto* t = rank2_f32(n.input(0));
        if (t && n.input(1) == io.input && !wte) wte = t;
        if (t && n.input(1) != io.input && !wpe) wpe = t;
      }
      if (n.op_type() == "LayerNormalization" && layer_norms++ == 0) first_ln = &n;
      if (n.op_type() == "Reshape" && n.input_size() == 2 && !heads_read_) read_heads(n, c);
    }
    STRATA_CHECK(wte, not_gpt(), "no Gather looks the ids up in a FLOAT [vocabulary, width] initializer (the token "
                                 "embedding, 'wte.weight')");
    STRATA_CHECK(wpe, not_gpt(), "no Gather looks positions up in a FLOAT [context, width] initializer (the position "
                                 "embedding, 'wpe.weight')");
    c.vocab_size = wte->dims(0);
    c.n_embd = wte->dims(1);
    c.block_size = wpe->dims(0);
    STRATA_CHECK(c.vocab_size > 0 && c.n_embd > 0 && c.block_size > 0, prefix(), "the embeddings '", wte->name(),
                 "' (", dims_str(*wte), ") and '", wpe->name(), "' (", dims_str(*wpe), ") must not be empty");
    STRATA_CHECK(layer_norms >= 3 && layer_norms % 2 == 1, not_gpt(), "it has ", layer_norms,
                 " LayerNormalization nodes (a GPT of n layers has 2n + 1)");
    c.n_layer = (layer_norms - 1) / 2;
    STRATA_CHECK(heads_read_, not_gpt(), "no Reshape splits the attention's width into heads ([0, 0, heads, width])");
    STRATA_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0, prefix(), "the head split gives ", c.n_head,
                 " heads, which do not divide the width ", c.n_embd, " of '", wte->name(), "'");
    STRATA_CHECK(io.sequence <= c.block_size, prefix(), "input '", io.input, "' has ", io.sequence,
                 " tokens, more than the ", c.block_size, " positions of '", wpe->name(), "'");
    c.layer_norm_eps = epsilon(*first_ln);
    return c;
  }

  void read_heads(const pb::NodeProto& n, nn::GptConfig& c) {
    auto it = file_init_.find(n.input(1));
    if (it == file_init_.end() || it->second->data_type() != pb::TensorProto::INT64) return;
    const TensorData d = read_tensor(*it->second, external_);
    if (!d.problem.empty() || d.i64.size() != 4) return;
    c.n_head = d.i64[2];
    heads_read_ = true;
  }

  // The attribute is f32; strata's own files also give the exact value in their metadata,
  // used when it rounds to the attribute (then the import computes what the export did).
  double epsilon(const pb::NodeProto& ln) const {
    double eps = 1e-5;  // ONNX's default
    for (const pb::AttributeProto& a : ln.attribute())
      if (a.name() == "epsilon" && a.type() == pb::AttributeProto::FLOAT) eps = a.f();
    auto it = metadata_.find(std::string(kGptEpsKey));
    if (it != metadata_.end()) {
      try {
        const double exact = std::stod(it->second);
        if (static_cast<float>(exact) == static_cast<float>(eps)) return exact;
      } catch (const std::exception&) {
        // An unreadable value: the attribute stands.
      }
    }
    return eps;
  }

  // ---- the node-for-node comparison ---------------------------------------------------
  [[noreturn]] void fail(int k, const pb::NodeProto& n, const pb::NodeProto& w, const std::string& why) const {
    STRATA_FAIL(prefix(), "node ", k, " '", n.name(), "' (", n.op_type(), ") ", why, " [strata's GPT: node '",
                w.name(), "' (", w.op_type(), ")]; strata imports INT64-input graphs as the GPT it exports, node "
                "for node");
  }

  // The file's value `a` stands where the written graph has `e`: the same from here on.
  bool bind(const std::string& a, const std::string& e) {
    auto [it, fresh] = to_want_.emplace(a, e);
    auto [back, fresh_back] = from_want_.emplace(e, a);
    return it->second == e && back->second == a;
  }

  std::string file_name_of(const std::string& e) const {
    auto it = from_want_.find(e);
    return it == from_want_.end() ? e : it->second;
  }

  void match_input(int k, const pb::NodeProto& n, const pb::NodeProto& w, int j) {
    const std::string& a = n.input(j);
    const std::string& e = w.input(j);
    const std::string which = "input " + std::to_string(j) + " '" + a + "'";
    if (a.empty()) fail(k, n, w, "has no input " + std::to_string(j));
    auto want_t = want_init_.find(e);
    if (want_t == want_init_.end()) {
      if (!to_want_.count(a))
        fail(k, n, w, which + (file_init_.count(a) ? " is an initializer where strata's GPT reads a computed value"
                                                  : " is neither the graph input nor an earlier node's output"));
      if (to_want_.at(a) != e) fail(k, n, w, "reads " + which + " where strata's GPT reads '" + file_name_of(e) + "'");
      return;
    }
    auto file_t = file_init_.find(a);
    if (file_t == file_init_.end())
      fail(k, n, w, which + " is not an initializer (is it missing from the file?); strata's GPT reads the " +
                        (want_t->second->has_raw_data() ? "constant '" : "parameter '") + e + "' at that input");
    if (!bind(a, e))
      fail(k, n, w, "reads the initializer " + which + " where strata's GPT reads '" + e + "' (shared with '" +
                        file_name_of(e) + "' in strata's GPT)");
    const pb::TensorProto& got = *file_t->second;
    const pb::TensorProto& need = *want_t->second;
    if (got.data_type() != need.data_type() ||
        !std::equal(got.dims().begin(), got.dims().end(), need.dims().begin(), need.dims().end()))
      fail(k, n, w, which + " is " + dims_str(got) + " where strata's GPT of this configuration (vocabulary " +
                        std::to_string(config_vocab()) + ") reads '" + e + "' as " + dims_str(need));
    if (need.has_raw_data() && !same_constant(got, need))
      fail(k, n, w, which + " holds other values than strata's constant '" + e + "'");
  }

  int64_t config_vocab() const {
    auto it = want_init_.find("wte.weight");
    return it == want_init_.end() ? 0 : it->second->dims(0);
  }

  bool same_constant(const pb::TensorProto& got, const pb::TensorProto& need) {
    const TensorData a = read_tensor(got, external_), b = read_tensor(need, external_);
    if (!a.problem.empty() || a.is_i64 != b.is_i64) return false;
    if (a.is_i64) return a.i64 == b.i64;
    return a.f32.nbytes() == b.f32.nbytes() && std::memcmp(a.f32.data_ptr(), b.f32.data_ptr(), a.f32.nbytes()) == 0;
  }

  void match_node(int k, const pb::NodeProto& n, const pb::NodeProto& w) {
    if (n.op_type() != w.op_type() || !(n.domain().empty() || n.domain() == "ai.onnx"))
      fail(k, n, w, "is another op");
    std::map<std::string, const pb::AttributeProto*> attrs;
    for (const pb::AttributeProto& a : n.attribute()) attrs[a.name()] = &a;
    for (const pb::AttributeProto& a : w.attribute()) {
      auto it = attrs.find(a.name());
      if (it == attrs.end()) fail(k, n, w, "has no attribute " + a.name() + " (strata's GPT sets " + attr_str(a) + ")");
      if (!same_attr(*it->second, a))
        fail(k, n, w, "has " + a.name() + " = " + attr_str(*it->second) + " where strata's GPT has " + attr_str(a));
      attrs.erase(it);
    }
    if (!attrs.empty()) fail(k, n, w, "has attribute " + attrs.begin()->first + ", which strata's GPT does not set");
    if (n.input_size() != w.input_size() || n.output_size() != w.output_size())
      fail(k, n, w, "has " + std::to_string(n.input_size()) + " inputs and " + std::to_string(n.output_size()) +
                        " outputs where strata's GPT has " + std::to_string(w.input_size()) + " and " +
                        std::to_string(w.output_size()));
    for (int j = 0; j < n.input_size(); ++j) match_input(k, n, w, j);
    for (int j = 0; j < n.output_size(); ++j)
      if (n.output(j).empty() || to_want_.count(n.output(j)) || file_init_.count(n.output(j)) ||
          !bind(n.output(j), w.output(j)))
        fail(k, n, w, "writes '" + n.output(j) + "', which is empty or already defined");
  }

  void match(const pb::GraphProto& want) {
    for (const pb::ValueInfoProto& v : g_.input())
      if (!file_init_.count(v.name())) bind(v.name(), want.input(0).name());
    const int count = std::min(g_.node_size(), want.node_size());
    for (int k = 0; k < count; ++k) match_node(k, g_.node(k), want.node(k));
    STRATA_CHECK(g_.node_size() == want.node_size(), prefix(), "the graph has ", g_.node_size(),
                 " nodes where strata's GPT of its configuration has ", want.node_size(),
                 " (strata imports INT64-input graphs as the GPT it exports, node for node)");
    const pb::ValueInfoProto& out = g_.output(0);
    STRATA_CHECK(to_want_.count(out.name()) && to_want_.at(out.name()) == want.output(0).name(), prefix(),
                 "the graph's output '", out.name(), "' is not the logits strata's GPT computes last");
    const auto& t = out.type().tensor_type();
    STRATA_CHECK(t.elem_type() == pb::TensorProto::FLOAT, prefix(), "output '", out.name(), "' is ",
                 data_type_name(t.elem_type()), " where a GPT's logits are FLOAT");
    if (t.has_shape()) {
      STRATA_CHECK(t.shape().dim_size() == 3, prefix(), "output '", out.name(), "' has rank ", t.shape().dim_size(),
                   " where a GPT's logits are [batch, sequence, vocabulary]");
      const auto& v = t.shape().dim(2);
      STRATA_CHECK(!v.has_dim_value() || v.dim_value() == config_vocab(), prefix(), "output '", out.name(),
                   "' declares a vocabulary of ", v.dim_value(), " but the token embedding has ", config_vocab(),
                   " rows");
    }
  }

  nn::StateDict weights(const pb::GraphProto& want) {
    nn::StateDict out;
    for (const pb::TensorProto& w : want.initializer()) {
      if (w.has_raw_data()) continue;
      const std::string& name = from_want_.at(w.name());
      TensorData d = read_tensor(*file_init_.at(name), external_);
      STRATA_CHECK(d.problem.empty(), prefix(), "initializer '", name, "' ", d.problem);
      out.emplace_back(w.name(), std::move(d.f32));
    }
    return out;
  }

  const pb::GraphProto& g_;
  const std::map<std::string, std::string>& metadata_;
  ExternalData& external_;
  std::string source_;
  std::map<std::string, const pb::TensorProto*> file_init_, want_init_;
  std::map<std::string, std::string> to_want_, from_want_;
  bool heads_read_ = false;
};

}  // namespace

bool reads_token_ids(const pb::GraphProto& g) {
  std::set<std::string> inits;
  for (const pb::TensorProto& t : g.initializer()) inits.insert(t.name());
  int inputs = 0;
  bool ids = false;
  for (const pb::ValueInfoProto& v : g.input()) {
    if (inits.count(v.name())) continue;
    ++inputs;
    const auto& t = v.type().tensor_type();
    ids = v.type().has_tensor_type() && t.elem_type() == pb::TensorProto::INT64 && t.has_shape() &&
          t.shape().dim_size() == 2;
  }
  return inputs == 1 && ids;
}

GptRead read_gpt_graph(const pb::GraphProto& g, const std::map<std::string, std::string>& metadata,
                       ExternalData& external, std::string_view source) {
  return GptReader(g, metadata, external, source).read();
}

}  // namespace strata::onnx::detail
