#include "strata/onnx/onnx.h"

#include <filesystem>

#include "strata/core/file.h"
#include "strata/nn/safetensors.h"
#include "strata/onnx/convert.h"
#include "strata/onnx/gpt_graph.h"

namespace strata::onnx {

namespace {
// Protobuf parses messages of at most 2 GiB.
constexpr uintmax_t kMaxFileBytes = (uintmax_t{1} << 31) - 1;

// A GPT's input is its ids [batch, sequence]: input_sizes empty (the sequence stays open) or [T].
std::string export_gpt(const nn::Module& m, const nn::GptConfig& c, const ExportOptions& o) {
  STRATA_CHECK(o.input_sizes.size() <= 1 && (o.input_sizes.empty() || o.input_sizes[0] > 0),
               "onnx export: a GPT's input_sizes are empty (the sequence length stays open) or [sequence length], "
               "got ", o.input_sizes.str());
  detail::GptIo io;
  io.input = o.input_name;
  io.output = o.output_name;
  if (!o.input_sizes.empty()) io.sequence = o.input_sizes[0];
  detail::WriteInfo info;
  info.doc = o.doc;
  return detail::write_gpt_model(c, m.state_dict(), io, info);
}

}  // namespace

std::string export_model(const nn::Module& m, const ExportOptions& o) {
  STRATA_CHECK(!o.input_name.empty() && !o.output_name.empty() && o.input_name != o.output_name,
               "onnx export: input and output names must be different and not empty ('", o.input_name, "', '",
               o.output_name, "')");
  if (const std::optional<nn::GptConfig> gpt = detail::gpt_config_of(m)) return export_gpt(m, *gpt, o);
  STRATA_CHECK(o.input_sizes.size() >= 1, "onnx export: input_sizes must give one item's sizes ([C,H,W] or "
                                          "[features]), got ", o.input_sizes.str());
  Shape in{-1};
  for (int64_t d : o.input_sizes) {
    STRATA_CHECK(d > 0, "onnx export: input_sizes ", o.input_sizes.str(), " must be positive");
    in.push_back(d);
  }
  ir::Graph g = detail::graph_of_module(m, in, o.input_name, o.output_name);
  if (o.fold_batch_norm) ir::fold_batch_norm(g);
  detail::WriteInfo info;
  info.doc = o.doc;
  info.metadata = {{"strata.batch_norm", o.fold_batch_norm ? "folded" : "kept"}};
  return detail::write_model(g, info);
}

void save_model(const nn::Module& m, const std::string& path, const ExportOptions& o) {
  nn::safetensors::write_file_atomic(path, export_model(m, o));
}

Imported import_model(std::string_view bytes, ops::DispatchMode mode, std::string_view backend,
                      std::string_view source, const std::filesystem::path& data_folder) {
  detail::ReadResult r = detail::read_model(bytes, source, data_folder);
  Imported out;
  if (r.gpt) {
    out.module = detail::module_of_gpt(*r.gpt, mode, backend);
    out.input_sizes = Shape{-1, r.gpt->io.sequence};
    out.input_dtype = DType::i64;
    out.input_name = r.gpt->io.input;
    out.output_name = r.gpt->io.output;
  } else {
    out.module = detail::module_of_graph(r.graph, mode, backend);
    out.input_sizes = r.graph.input_sizes;
    out.input_name = r.graph.input;
    out.output_name = r.graph.output;
  }
  out.opset = r.opset;
  out.producer = r.producer;
  return out;
}

// Through core's bounded reader (regular files only, never past protobuf's 2 GiB limit).
Imported load_model(const std::string& path, ops::DispatchMode mode, std::string_view backend) {
  const std::vector<uint8_t> bytes = read_regular_file(path, kMaxFileBytes);
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  return import_model(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), mode, backend,
                      ::strata::quoted(path), folder.empty() ? std::filesystem::path(".") : folder);
}

}  // namespace strata::onnx
