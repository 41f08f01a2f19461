#pragma once
// ONNX export and import of strata's nn models (opset 17; the protobuf classes of
// Debian's libonnx-dev). Built when CMake finds ONNX and protobuf (STRATA_WITH_ONNX).
//
// Export writes the inference graph of a module tree: ResNet, LeNet, Sequential and
// Graph modules made of strata's layers, in any dispatch mode, on any device:
//
//   onnx::ExportOptions o;
//   o.input_sizes = Shape{3, 224, 224};   // one item; the batch dimension stays open
//   onnx::save_model(model->module(), "resnet50.onnx", o);
//
//  - Ops: Conv, BatchNormalization (or folded into the conv before it, o.fold_batch_norm),
//    Relu, MaxPool, AveragePool, GlobalAveragePool + Flatten, Flatten, Gemm, Add.
//    Dropout is the identity at inference and is left out; batch norm uses its running
//    statistics whatever the module's train/eval state.
//  - Input "input" [batch, ...input_sizes], output "output": f32, dimension 0 named "batch".
//  - Initializer names are the state dict's ("layer1.0.conv1.weight", "bn1.running_mean");
//    num_batches_tracked is not exported. Folding keeps the conv's names
//    ("<conv>.weight", "<conv>.bias") and drops the batch norm's entries. Values are f32.
//
// A GPT (nn::Gpt, nn/layers/transformer.h; f32) exports as the whole model, to standard
// ops that onnxruntime runs: Gather for the embeddings, LayerNormalization, MatMul + Add for
// the projections (the weights stay [out, in] behind a Transpose), the heads split by
// Split/Reshape/Transpose, attention as MatMul, Mul by the scale, Where with a causal mask
// computed from the ids' shape, Softmax and MatMul (portable, rather than opset 23's
// Attention), GELU's tanh form as its formula (rather than opset 20's Gelu), and the tied
// output projection as a MatMul by the transposed token embedding, one initializer for both
// (onnx/gpt_graph.h has the whole graph). Input: INT64 ids [batch, sequence] (input_sizes
// empty: the sequence stays open; [T]: fixed); output: FLOAT logits [batch, sequence, vocab].
//
// Import builds an nn::Dag (nn/layers/dag.h) of strata layers that runs in every
// dispatch mode on any backend, from a graph of the ops above (opsets 11 to 23; also
// Identity, Dropout at inference, Reshape to [N, features], ReduceMean over H and W,
// MatMul by a constant and an Add of a constant as its bias), with initializers inline or
// in external data files beside the model (onnx/external_data.h), so the graphs of
// PyTorch's dynamo exporter (opset 18+, ReduceMean + Reshape, "m.onnx.data") import too.
// Every op, attribute or tensor it cannot express is named in one strata::Error, none
// left out; a malformed file is an error too, never a crash. The module's parameters are
// named after the initializers when they share a "<prefix>.<role>" pattern (so an
// exported strata model comes back with its own state dict names), else after the node.
// A graph whose input is INT64 is read as a GPT: its configuration from the embeddings,
// layer norms and head split, and then it must be the graph strata's export writes for that
// configuration, node for node (ops, attributes, wiring, constants, weight shapes); the
// first difference is an error naming the node. It imports as an nn::Gpt.
// A model exported by strata and imported again computes bitwise the same outputs.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "strata/nn/module.h"
#include "strata/ops/dispatch.h"

namespace strata::onnx {

inline constexpr int64_t kOpset = 17;

struct ExportOptions {
  Shape input_sizes;  // one input item, without the batch: [C, H, W] (or [features]); a GPT's: [] or [T]
  bool fold_batch_norm = false;
  std::string input_name = "input", output_name = "output";
  std::string doc;  // the model's doc_string
};

// The ONNX model's bytes.
std::string export_model(const nn::Module& m, const ExportOptions& o);
// Written atomically (as checkpoints are: a temporary in the same folder, then renamed).
void save_model(const nn::Module& m, const std::string& path, const ExportOptions& o);

struct Imported {
  std::unique_ptr<nn::Module> module;  // an nn::Dag, or an nn::Gpt
  Shape input_sizes;                   // with the batch first; -1 where the file leaves it open
  DType input_dtype = DType::f32;      // a GPT's: i64 token ids
  std::string input_name, output_name;
  int64_t opset = 0;
  std::string producer;  // "name version" of the program that wrote the file
};

// `source` names the bytes in error messages. Initializers kept in external files (ONNX's
// external data, as torch.onnx.export(..., dynamo=True) writes them: "m.onnx.data" beside
// "m.onnx") are read from `data_folder`, the model file's folder, and never from outside
// it; with no folder (the default) the model must be self-contained.
Imported import_model(std::string_view bytes, ops::DispatchMode mode, std::string_view backend,
                      std::string_view source = "<memory>", const std::filesystem::path& data_folder = {});
// Reads a regular file of at most 2 GiB (protobuf's limit), then import_model with the
// file's folder for external data.
Imported load_model(const std::string& path, ops::DispatchMode mode, std::string_view backend);

}  // namespace strata::onnx
