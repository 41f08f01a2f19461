#pragma once
// Internal to onnx/: the four conversions around ir::Graph.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "strata/onnx/ir.h"
#include "strata/ops/dispatch.h"

namespace strata::onnx::detail {

// The inference graph of a module tree (from_module.cpp); input_sizes has the batch first (-1).
ir::Graph graph_of_module(const nn::Module& m, const Shape& input_sizes, const std::string& input_name,
                          const std::string& output_name);

// The bytes of an ONNX model holding g (proto_write.cpp).
struct WriteInfo {
  std::string doc;  // the model's doc_string
  std::vector<std::pair<std::string, std::string>> metadata;
};
std::string write_model(const ir::Graph& g, const WriteInfo& info);

// An ONNX model's graph in strata's terms (proto_read.cpp): every op, attribute and
// tensor it cannot express is collected, and one strata::Error names them all. External
// data is read from `data_folder` (external_data.h; empty: the model must be self-contained).
struct ReadResult {
  ir::Graph graph;
  int64_t opset = 0;
  std::string producer;
};
ReadResult read_model(std::string_view bytes, std::string_view source, const std::filesystem::path& data_folder);

// The module that runs g (to_module.cpp).
std::unique_ptr<nn::Module> module_of_graph(const ir::Graph& g, ops::DispatchMode mode, std::string_view backend);

}  // namespace strata::onnx::detail
