#pragma once
// The safetensors format (huggingface/safetensors), read and written without any
// library but a JSON parser, so files move between strata and PyTorch's
// safetensors.torch.load_file/save_file:
//   8 bytes     header length N, little-endian u64
//   N bytes     JSON: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
//               ..., "__metadata__": {"<key>": "<string>", ...}}   (padded with spaces)
//   the rest    raw little-endian tensor data; offsets are relative to its start.
// DTypes: F32 F64 F16 BF16 I64 I32 U8. Data is written densely in the given order,
// each tensor starting at a multiple of its element size.
//
// Reading validates everything before any tensor is built: file and header
// lengths, JSON shape, known dtypes, shapes, offsets inside the data area, lengths
// equal to shape x element size, no two tensors overlapping. Any problem is a
// strata::Error naming the file and the entry; a truncated or corrupt file never
// crashes and never loads garbage.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "strata/nn/module.h"

namespace strata::nn::safetensors {

using Metadata = std::map<std::string, std::string>;

struct Contents {
  StateDict tensors;  // CPU, contiguous, in data order
  Metadata metadata;
};

// `tensors` as dense host tensors (those already dense on the host are not copied).
StateDict to_host(const StateDict& tensors);

// The bytes of a file holding `tensors` (any device, dtype of the list above, any
// strides: copied to dense host order).
std::string serialize(const StateDict& tensors, const Metadata& metadata = {});
// Parses the bytes of a file; `source` names it in error messages.
Contents parse(std::string_view bytes, std::string_view source = "<memory>");

// Atomic save: writes "<path>.tmp.<pid>" in the same directory, fsyncs it, renames
// it over `path`, then fsyncs the directory. A crash or error mid-write leaves any
// previous file at `path` intact (the temporary is removed on error).
void save(const std::string& path, const StateDict& tensors, const Metadata& metadata = {});
Contents load(const std::string& path);

// The format's dtype names.
std::string_view dtype_code(DType t);
DType parse_dtype_code(std::string_view code, std::string_view where);

// Writes `bytes` to `path` atomically (as save()).
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace strata::nn::safetensors
