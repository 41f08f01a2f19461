#pragma once
// Where each buffer a recorded step touches comes from in the generated program: the arena
// (at the offset direct mode's planner chose), the caller's input, the model's input
// buffer it is copied into, or a constant of the
// model (a weight, a bias, a folded copy) whose bytes go to the weights file. Anything else
// is refused by name: the generated program would read memory it does not have.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strata/codegen/recorded_step.h"
#include "strata/nn/module.h"

namespace strata::codegen {

enum class BufferKind { arena, input, input_buffer, constant };

struct BufferRef {
  BufferKind kind = BufferKind::arena;
  int64_t offset = 0;   // arena, input, input buffer: bytes from its start
  int constant = -1;    // index into BufferMap::constants()
};

struct Constant {
  std::string name;  // "conv1.weight", "layer1.0.conv1.weight (folded)"
  const std::byte* data = nullptr;
  int64_t bytes = 0;
  int64_t file_offset = 0;  // in the weights file, 64-byte aligned
};

class BufferMap {
 public:
  // `names` gives constants their names (the model's parameters and folded copies, by address).
  BufferMap(const RecordedStep& step, std::map<const void*, std::string> names);
  // Throws naming `what` (op and argument) when the view is in none of the known places.
  BufferRef locate(const ops::TensorView& v, const std::string& what);
  const std::vector<Constant>& constants() const { return constants_; }
  int64_t constants_bytes() const { return next_file_offset_; }

 private:
  const RecordedStep& step_;
  std::map<const void*, std::string> names_;
  std::vector<Constant> constants_;
  std::map<const void*, int> by_data_;
  int64_t next_file_offset_ = 0;
};

// The bytes a view spans from its data pointer: the last element's offset plus one, in bytes.
int64_t view_span_bytes(const ops::TensorView& v);

}  // namespace strata::codegen
