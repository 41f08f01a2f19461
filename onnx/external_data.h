#pragma once
// Internal to onnx/: initializers whose bytes an ONNX file keeps in other files (ONNX's
// "external data": TensorProto.data_location EXTERNAL with external_data entries
// location, offset, length, checksum), as torch.onnx.export(..., dynamo=True) writes
// models (PyTorch 2.9 on: "<model>.onnx.data" beside "<model>.onnx").
//
// Nothing in the file is trusted. A location is a path relative to the model file's
// folder and may not leave it: absolute paths, ".." and symbolic links that resolve
// outside the folder are refused. offset and length are decimal byte counts; the range
// must lie within the file and hold exactly the tensor's bytes (length absent: the rest
// of the file). checksum, when given, is the SHA-1 of the whole file (ONNX's definition),
// as 40 hexadecimal digits, checked once per file. basepath, which ONNX's own loader
// writes into loaded models and ignores when reading, is ignored; any other key is refused.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace strata::onnx::detail {

using ExternalEntries = std::vector<std::pair<std::string, std::string>>;  // external_data's key/value pairs

// Where a tensor's bytes lie: checked to be inside the folder, the file and the range.
struct ExternalRange {
  std::filesystem::path file;  // canonical
  uint64_t offset = 0;
};

class ExternalData {
 public:
  // `folder`: the model file's folder; empty when the model came from memory (then every
  // external tensor is refused, with the reason).
  explicit ExternalData(std::filesystem::path folder) : folder_(std::move(folder)) {}

  // The checked range of a tensor of `bytes` bytes described by `entries`. Throws
  // strata::Error saying what is wrong, naming the location and the model's folder (the
  // caller names the tensor).
  ExternalRange locate(const ExternalEntries& entries, uint64_t bytes);

 private:
  std::filesystem::path resolve(const std::string& location);
  void check_sha1(const std::filesystem::path& file, const std::string& location, const std::string& checksum);

  std::filesystem::path folder_, canonical_folder_;
  std::map<std::filesystem::path, std::string> sha1_;  // files hashed so far -> SHA-1, lower-case hex
};

}  // namespace strata::onnx::detail
