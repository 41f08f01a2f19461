#pragma once
// Internal to onnx/: nn::Gpt as a graph of standard ONNX ops (opset 17), written once
// (gpt_write.cpp) and used both ways: export writes it with the model's weights; import
// (gpt_read.cpp) writes it again for the configuration a file's initializers and attributes
// imply, without the weights' data, and accepts the file only when its nodes are that graph
// node for node (same ops, attributes, wiring, constants and weight shapes), so whatever it
// imports computes what nn::Gpt computes.
//
// The graph (B, T dynamic unless fixed at export; C = n_embd, H heads of D = C / H):
//   positions = Range(0, Gather(Shape(ids), 1), 1)                       [T] int64
//   x = Gather(wte, ids) + Gather(wpe, positions)                        [B, T, C]
//   causal = GreaterOrEqual(Unsqueeze(positions, 1), Unsqueeze(positions, 0))  [T, T]
//   per block: x += attn(LayerNormalization(x)); x += mlp(LayerNormalization(x))
//     linear(x, W, b) = MatMul(x, Transpose(W)) + b    (W kept [out, in], strata's layout)
//     attn: Split(linear) into q, k, v; Reshape [B, T, H, D]; Transpose to [B, H, T, D]
//           (k to [B, H, D, T]); Softmax(Where(causal, MatMul(q, k) * 1/sqrt(D), -inf)) @ v;
//           Transpose and Reshape back to [B, T, C]; linear
//     mlp:  linear, GELU's tanh form as its formula (Mul, Add, Tanh), linear
//   logits = MatMul(LayerNormalization(x), Transpose(wte))   (the tied head: one initializer)
// Attention is these portable ops rather than opset 23's Attention, and GELU its formula
// rather than opset 20's Gelu: onnxruntime and every ONNX tool since opset 17 run them.
#include <optional>
#include <string>
#include <string_view>

#include "strata/onnx/convert.h"
#include "strata/onnx/proto_fields.h"

namespace strata::onnx::detail {

// Writes the graph of a GPT of configuration c into g. weights: the model's state dict,
// whose values become the initializers; nullptr: the weights' initializers get their
// names, type and dims but no data (what import compares a file against).
void write_gpt_graph(pb::GraphProto& g, const nn::GptConfig& c, const GptIo& io, const nn::StateDict* weights);

// The configuration of m when it is an nn::Gpt of any policy, else nullopt.
std::optional<nn::GptConfig> gpt_config_of(const nn::Module& m);

// The ONNX model of a GPT (its configuration c, its state dict) with the model-level fields
// of write_model. Refuses a model that does not compute in f32.
std::string write_gpt_model(const nn::GptConfig& c, const nn::StateDict& weights, const GptIo& io,
                            const WriteInfo& info);

// Whether the graph's one input is INT64 of rank 2 (token ids [batch, sequence]): such a
// graph is read as a GPT.
bool reads_token_ids(const pb::GraphProto& g);
// The GPT of graph g, or a strata::Error naming the first node, initializer or value where
// g differs from what strata's GPT export writes, and how. `metadata` is the model's
// metadata_props (the exact layer-norm epsilon strata writes beside the f32 attribute).
GptRead read_gpt_graph(const pb::GraphProto& g, const std::map<std::string, std::string>& metadata,
                       ExternalData& external, std::string_view source);

// Metadata key of the exact layer-norm epsilon (ONNX's attribute is f32).
inline constexpr std::string_view kGptEpsKey = "strata.gpt.layer_norm_eps";

}  // namespace strata::onnx::detail
