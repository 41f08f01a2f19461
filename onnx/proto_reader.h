#pragma once
// Internal to onnx/: the reader of ONNX files behind detail::read_model (convert.h).
// proto_read.cpp holds the model, graph, constant and value bookkeeping; read_nodes.cpp
// one reader per ONNX op. Every problem is collected, none thrown, until report().
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "strata/onnx/convert.h"
#include "strata/onnx/proto_fields.h"

namespace strata::onnx::detail {

// "Add, AveragePool, ...": the ops the reader takes, for messages (read_nodes.cpp).
std::string supported_ops();

// A square window with equal strides and dilations and the same padding on every side:
// what strata's Conv2d and pooling layers take.
struct Window {
  std::optional<int64_t> kernel;
  int64_t stride = 1, pad = 0, dilation = 1;
  bool ok = true;
};

class Reader {
 public:
  // External data is read from `data_folder` (empty: the model must be self-contained).
  Reader(std::string_view source, const std::filesystem::path& data_folder) : source_(source), external_(data_folder) {}
  ReadResult read(std::string_view bytes);

 private:
  // ---- problems (proto_read.cpp) ------------------------------------------------------
  void problem(std::string what) { problems_.push_back(std::move(what)); }
  void node_problem(const std::string& what) { problem(where_ + ": " + what); }
  void report();

  // ---- constants ----------------------------------------------------------------------
  void read_constant(const pb::TensorProto& t, const std::string& what);
  // Whether `name` is a constant; an unreadable one is reported (once) where it is used.
  bool is_constant(const std::string& name);
  const std::vector<int64_t>* ints_of(const std::string& name);
  // Input k of the current node as the f32 parameter `role` of the given rank, used by no
  // other node; appended to params. False (reported) otherwise.
  bool take_param(const pb::NodeProto& n, int k, int rank, const std::string& role, std::vector<std::string>& params);

  // ---- values -------------------------------------------------------------------------
  std::string resolve(const std::string& v) const;
  // The computed value read as input k, or "" (reported) when there is none.
  std::string activation(const pb::NodeProto& n, int k);
  int rank_of(const std::string& v) const { return ranks_.count(v) ? ranks_.at(v) : -1; }
  // Whether x (non-empty) has rank r, as far as known; reported if not.
  bool has_rank(const std::string& x, int r);
  // A global average pool's output is [N,C] in strata but [N,C,1,1] in the file: only
  // Flatten or Reshape to [N,C] may read it.
  bool not_squeezed(const std::string& v);
  bool fresh_name(const std::string& name);
  // The output exists for later nodes (they are not reported again), but has no node.
  void define_failed(const std::string& name);
  void alias(const std::string& name, const std::string& of);
  // "<prefix>" when every parameter is "<prefix>.<role>" (state dict names then are the
  // file's), else the node's name; unique among the modules.
  std::string module_name(const ir::Node& n);
  // Adds the node when it is complete (its inputs and parameters read), with its output's
  // rank and shape (strata's shape rules, when the input's sizes are known).
  void emit(ir::Node n, bool complete, int rank, bool squeezed = false);

  // ---- the graph ----------------------------------------------------------------------
  void read_input(const pb::ValueInfoProto& v);
  void read_graph(const pb::GraphProto& graph);

  // ---- nodes (read_nodes.cpp) ---------------------------------------------------------
  void read_node(const pb::NodeProto& n);
  Window window(Attrs& a);
  void read_conv(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x);
  void read_batch_norm(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x);
  void read_pool(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x);
  void read_global_pool(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x);
  // Whether Reshape(x, shape) is x flattened after the batch dimension.
  bool flattens(const std::string& x, const std::vector<int64_t>& shape, bool allow_zero) const;
  void read_flatten(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x);
  void read_gemm(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x);
  void read_matmul(const pb::NodeProto& n, Attrs& a, ir::Node out, const std::string& x);
  // Add of a constant: the bias of the MatMul (or bias-less Gemm) just before it.
  void read_bias_add(const pb::NodeProto& n, Attrs& a, const std::string& output);
  void read_constant_node(Attrs& a, const std::string& output);

  std::string source_, where_;
  ExternalData external_;
  ir::Graph g_;
  std::vector<std::string> problems_;
  std::map<std::string, std::vector<std::string>> unsupported_;  // op type -> nodes
  std::map<std::string, TensorData> constants_;
  std::map<std::string, std::string> bad_constants_;  // name -> why it cannot be used (cleared once said)
  std::map<std::string, std::string> param_user_;     // initializer -> the node it is a parameter of
  std::map<std::string, int> ranks_;                  // computed values -> rank (-1: unknown)
  std::map<std::string, int> readers_;                // value name -> nodes (and graph outputs) reading it
  std::map<std::string, std::string> alias_;          // Identity, Dropout, no-op Flatten, bias Add
  std::map<std::string, Shape> shapes_;               // for a batch of one, where known
  std::set<std::string> squeezed_, modules_;
  int index_ = 0;
};

}  // namespace strata::onnx::detail
