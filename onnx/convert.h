#pragma once
// Internal to onnx/: the four conversions around ir::Graph, and a GPT's (gpt_graph.h).
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "strata/nn/layers/transformer.h"
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

// A GPT's graph inputs and outputs.
struct GptIo {
  std::string input = "input", output = "output";
  int64_t sequence = -1;  // a fixed sequence length, or -1: the dimension stays open
};

// A GPT read back from a file: its configuration and every parameter under nn::Gpt's
// state dict names.
struct GptRead {
  nn::GptConfig config;
  nn::StateDict weights;
  GptIo io;
};

// An ONNX model's graph in strata's terms (proto_read.cpp): every op, attribute and
// tensor it cannot express is collected, and one strata::Error names them all. External
// data is read from `data_folder` (external_data.h; empty: the model must be self-contained).
struct ReadResult {
  ir::Graph graph;
  std::optional<GptRead> gpt;  // set (and graph left empty) when the graph reads INT64 token ids
  int64_t opset = 0;
  std::string producer;
};
ReadResult read_model(std::string_view bytes, std::string_view source, const std::filesystem::path& data_folder);

// The module that runs g (to_module.cpp).
std::unique_ptr<nn::Module> module_of_graph(const ir::Graph& g, ops::DispatchMode mode, std::string_view backend);
// The module that runs r (to_module.cpp): an nn::Gpt with r's weights, in eval mode.
std::unique_ptr<nn::Module> module_of_gpt(const GptRead& r, ops::DispatchMode mode, std::string_view backend);

}  // namespace strata::onnx::detail
