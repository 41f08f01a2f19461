// ONNX ModelProto bytes -> ir::Graph: the model, the graph, its constants and values
// (the per-op readers are in read_nodes.cpp). Every problem with the file is collected
// (every unsupported op by type with the nodes that use it, every unsupported attribute,
// input, output or tensor, every shape that does not fit) and reported together in one
// strata::Error. Values computed by a node that could not be read still count as defined,
// so one bad node is reported once, not again by each node after it.
#include <climits>

#include "strata/onnx/gpt_graph.h"
#include "strata/onnx/proto_reader.h"

namespace strata::onnx::detail {

namespace {
constexpr int64_t kMinOpset = 11, kMaxOpset = 23;
constexpr size_t kMaxListed = 100;  // problems listed one by one (unsupported ops are always all listed)
}  // namespace

ReadResult Reader::read(std::string_view bytes) {
  STRATA_CHECK(bytes.size() <= static_cast<size_t>(INT_MAX), "onnx import ", source_, ": ", bytes.size(),
               " bytes is past protobuf's 2 GiB limit");
  pb::ModelProto model;
  STRATA_CHECK(model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), "onnx import ", source_,
               ": not an ONNX model (protobuf cannot parse its ", bytes.size(), " bytes)");
  ReadResult r;
  r.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  if (model.ir_version() < 3)
    problem("the model has IR version " + std::to_string(model.ir_version()) +
            " (strata reads 3 or later; is this an ONNX file?)");
  for (const pb::OperatorSetIdProto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") r.opset = o.version();
  if (r.opset == 0)
    problem("the model imports no version of the default operator set (ai.onnx)");
  else if (r.opset < kMinOpset || r.opset > kMaxOpset)
    problem("the model uses opset " + std::to_string(r.opset) + "; strata reads opsets " +
            std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
  if (!model.has_graph()) {
    problem("the model has no graph");
  } else if (reads_token_ids(model.graph())) {
    report();  // the model-level problems first
    std::map<std::string, std::string> metadata;
    for (const pb::StringStringEntryProto& e : model.metadata_props()) metadata[e.key()] = e.value();
    r.gpt = read_gpt_graph(model.graph(), metadata, external_, source_);
    return r;
  } else {
    read_graph(model.graph());
  }
  report();
  r.graph = std::move(g_);
  return r;
}

void Reader::report() {
  if (problems_.empty() && unsupported_.empty()) return;
  std::string msg;
  for (const auto& [op, nodes] : unsupported_) {
    msg += "\n  op " + op + " is not supported (" + std::to_string(nodes.size()) + " node" +
           (nodes.size() == 1 ? "" : "s") + ": ";
    for (size_t i = 0; i < nodes.size() && i < 5; ++i) msg += (i ? ", " : "") + nodes[i];
    msg += nodes.size() > 5 ? ", ...)" : ")";
  }
  for (size_t i = 0; i < problems_.size() && i < kMaxListed; ++i) msg += "\n  " + problems_[i];
  if (problems_.size() > kMaxListed) msg += "\n  ... and " + std::to_string(problems_.size() - kMaxListed) + " more";
  const size_t count = problems_.size() + unsupported_.size();
  STRATA_FAIL("onnx import ", source_, ": ", count, " problem", count == 1 ? "" : "s", ":", msg, "\n  (strata imports ",
              supported_ops(), "; opsets ", kMinOpset, " to ", kMaxOpset, ")");
}

void Reader::read_constant(const pb::TensorProto& t, const std::string& what) {
  const std::string& name = t.name();
  if (name.empty()) return problem(what + " has no name");
  if (constants_.count(name) || bad_constants_.count(name) || ranks_.count(name))
    return problem(what + " '" + name + "' is defined twice");
  TensorData d = read_tensor(t, external_);
  if (!d.problem.empty())
    bad_constants_[name] = what + " '" + name + "' " + d.problem;
  else
    constants_.emplace(name, std::move(d));
}

bool Reader::is_constant(const std::string& name) {
  auto bad = bad_constants_.find(name);
  if (bad != bad_constants_.end()) {
    if (!bad->second.empty()) problem(bad->second);
    bad->second.clear();
    return true;
  }
  return constants_.count(name) > 0;
}

const std::vector<int64_t>* Reader::ints_of(const std::string& name) {
  auto it = constants_.find(name);
  return it != constants_.end() && it->second.is_i64 ? &it->second.i64 : nullptr;
}

bool Reader::take_param(const pb::NodeProto& n, int k, int rank, const std::string& role, std::vector<std::string>& params) {
  if (k >= n.input_size() || n.input(k).empty()) {
    node_problem("has no " + role);
    return false;
  }
  const std::string& name = n.input(k);
  if (!is_constant(name)) {
    node_problem(role + " '" + name + "' must be an initializer (strata's layers own their parameters)");
    return false;
  }
  auto it = constants_.find(name);
  if (it == constants_.end()) return false;  // unreadable: reported
  const TensorData& d = it->second;
  if (d.is_i64 || d.f32.dim() != rank) {
    node_problem(role + " '" + name + "' must be FLOAT of rank " + std::to_string(rank) + ", not " +
                 (d.is_i64 ? "INT64" : d.f32.sizes().str()));
    return false;
  }
  auto [user, fresh] = param_user_.emplace(name, where_);
  if (!fresh) {
    node_problem(role + " '" + name + "' is also a parameter of " + user->second + " (shared parameters are not "
                 "supported)");
    return false;
  }
  g_.initializers.emplace_back(name, d.f32);
  params.push_back(name);
  return true;
}

std::string Reader::resolve(const std::string& v) const {
  auto it = alias_.find(v);
  return it == alias_.end() ? v : it->second;
}

std::string Reader::activation(const pb::NodeProto& n, int k) {
  if (k >= n.input_size() || n.input(k).empty()) {
    node_problem("input " + std::to_string(k) + " is missing");
    return "";
  }
  const std::string v = resolve(n.input(k));
  if (ranks_.count(v)) return v;
  if (constants_.count(v) || bad_constants_.count(v))
    node_problem("input " + std::to_string(k) + " is the constant '" + v + "' where strata's op takes a computed value");
  else
    node_problem("input " + std::to_string(k) + " '" + v + "' is neither the graph input nor an earlier node's output");
  return "";
}

bool Reader::has_rank(const std::string& x, int r) {
  if (x.empty()) return false;
  if (rank_of(x) < 0 || rank_of(x) == r) return true;
  node_problem("input '" + x + "' has rank " + std::to_string(rank_of(x)) + "; strata's op takes rank " +
               std::to_string(r));
  return false;
}

bool Reader::not_squeezed(const std::string& v) {
  if (v.empty()) return false;
  if (!squeezed_.count(v)) return true;
  node_problem("reads '" + v + "', a global average pool's output ([N,C,1,1] in ONNX, [N,C] in strata): only "
               "Flatten or Reshape to [N,C] may follow it");
  return false;
}

bool Reader::fresh_name(const std::string& name) {
  if (name.empty()) {
    node_problem("has an empty output name");
    return false;
  }
  if (ranks_.count(name) || constants_.count(name) || bad_constants_.count(name) || alias_.count(name)) {
    node_problem("writes '" + name + "', which already exists (ONNX values are written once)");
    return false;
  }
  return true;
}

void Reader::define_failed(const std::string& name) {
  if (fresh_name(name)) ranks_.emplace(name, -1);
}

void Reader::alias(const std::string& name, const std::string& of) {
  if (fresh_name(name)) alias_[name] = of;
}

std::string Reader::module_name(const ir::Node& n) {
  std::string base;
  const auto roles = ir::param_roles(n.op);
  for (size_t i = 0; i < n.params.size(); ++i) {
    std::string suffix = ".";
    suffix += roles[i];
    const std::string& p = n.params[i];
    const std::string prefix = p.size() > suffix.size() && p.ends_with(suffix) ? p.substr(0, p.size() - suffix.size()) : "";
    if (prefix.empty() || (i > 0 && prefix != base)) {
      base.clear();
      break;
    }
    base = prefix;
  }
  if (base.empty() || modules_.count(base)) base = n.name;
  std::string name = base;
  for (int i = 1; modules_.count(name); ++i) name = base + "_" + std::to_string(i);
  modules_.insert(name);
  return name;
}

void Reader::emit(ir::Node n, bool complete, int rank, bool squeezed) {
  if (!complete || n.inputs.empty() || !fresh_name(n.output)) return define_failed(n.output);
  std::vector<Shape> in;
  for (const std::string& v : n.inputs)
    if (shapes_.count(v)) in.push_back(shapes_.at(v));
  if (in.size() == n.inputs.size()) {
    try {
      shapes_[n.output] = ir::infer_node(g_, n, in);
    } catch (const Error& e) {
      node_problem(e.what());
    }
  }
  n.module = module_name(n);
  ranks_.emplace(n.output, rank);
  if (squeezed) squeezed_.insert(n.output);
  g_.nodes.push_back(std::move(n));
}

void Reader::read_input(const pb::ValueInfoProto& v) {
  g_.input = v.name();
  ranks_[v.name()] = -1;
  if (!v.type().has_tensor_type()) return problem("input '" + v.name() + "' is not a tensor");
  const auto& tt = v.type().tensor_type();
  if (tt.elem_type() != pb::TensorProto::FLOAT)
    problem("input '" + v.name() + "' has elements of type " + data_type_name(tt.elem_type()) + " (strata takes FLOAT" +
            (tt.elem_type() == pb::TensorProto::INT64 ? ", and INT64 token ids [batch, sequence] into a GPT" : "") + ")");
  if (!tt.has_shape()) return problem("input '" + v.name() + "' has no shape (strata needs at least its rank)");
  const int rank = tt.shape().dim_size();
  if (rank != 2 && rank != 4)
    return problem("input '" + v.name() + "' has rank " + std::to_string(rank) + " (strata takes [N,C,H,W] or [N,F])");
  bool known = true;
  for (const auto& d : tt.shape().dim()) {
    const bool fixed = d.has_dim_value() && d.dim_value() > 0 && d.dim_value() <= (int64_t{1} << 31);
    if (!fixed && g_.input_sizes.size() > 0) known = false;
    g_.input_sizes.push_back(fixed ? d.dim_value() : -1);
  }
  ranks_[v.name()] = rank;
  if (known) {  // shapes are followed for a batch of one
    Shape s = g_.input_sizes;
    s[0] = 1;
    shapes_[v.name()] = s;
  }
}

void Reader::read_graph(const pb::GraphProto& graph) {
  if (graph.sparse_initializer_size() > 0) problem("the graph has sparse initializers (not supported)");
  for (const pb::TensorProto& t : graph.initializer()) read_constant(t, "initializer");
  std::vector<const pb::ValueInfoProto*> inputs;
  for (const pb::ValueInfoProto& v : graph.input())
    if (!constants_.count(v.name()) && !bad_constants_.count(v.name())) inputs.push_back(&v);
  if (inputs.size() == 1) {
    read_input(*inputs[0]);
  } else {
    std::string names;
    for (auto* v : inputs) names += (names.empty() ? "'" : ", '") + v->name() + "'";
    problem("the graph has " + std::to_string(inputs.size()) + " inputs" + (names.empty() ? "" : " (" + names + ")") +
            "; strata models take one");
  }
  for (const pb::NodeProto& n : graph.node())
    for (const std::string& v : n.input()) ++readers_[v];
  for (const pb::ValueInfoProto& v : graph.output()) ++readers_[v.name()];
  for (index_ = 0; index_ < graph.node_size(); ++index_) read_node(graph.node(index_));
  if (graph.output_size() != 1) {
    problem("the graph has " + std::to_string(graph.output_size()) + " outputs; strata models give one");
    return;
  }
  const std::string out = resolve(graph.output(0).name());
  if (!ranks_.count(out) || (out == g_.input && !g_.input.empty()))
    problem("the graph output '" + out + "' is not computed by any node");
  else if (squeezed_.count(out))
    problem("the graph output '" + out + "' is a global average pool's [N,C,1,1], which is [N,C] in strata (add a "
            "Flatten)");
  g_.output = out;
}

ReadResult read_model(std::string_view bytes, std::string_view source, const std::filesystem::path& data_folder) {
  return Reader(source, data_folder).read(bytes);
}

}  // namespace strata::onnx::detail
