#include "strata/codegen/buffer_map.h"

#include "strata/core/error.h"

namespace strata::codegen {

int64_t view_span_bytes(const ops::TensorView& v) {
  if (v.numel() == 0) return 0;
  int64_t last = 0;
  for (int d = 0; d < v.dim(); ++d) last += (v.sizes[d] - 1) * v.strides[d];
  return (last + 1) * static_cast<int64_t>(dtype_size(v.dtype));
}

BufferMap::BufferMap(const RecordedStep& step, std::map<const void*, std::string> names)
    : step_(step), names_(std::move(names)) {}

BufferRef BufferMap::locate(const ops::TensorView& v, const std::string& what) {
  const auto* p = static_cast<const std::byte*>(v.data);
  const auto* base = static_cast<const std::byte*>(step_.arena.base);
  const int64_t span = view_span_bytes(v);
  // The caller's input is host memory; everything else lives where the step ran.
  STRATA_CHECK(v.device == step_.device || v.data == step_.input.data, "strata_codegen: ", what, " lives on ",
               v.device.str(), "; the generated program reads memory on ", step_.device.str(), " only");
  if (base && p >= base && p + span <= base + step_.arena.bytes) return {BufferKind::arena, p - base, -1};
  const auto* ib = static_cast<const std::byte*>(step_.input_buffer.data);
  if (ib && p >= ib && p + span <= ib + view_span_bytes(step_.input_buffer))
    return {BufferKind::input_buffer, p - ib, -1};
  const auto* in = static_cast<const std::byte*>(step_.input.data);
  if (in && p >= in && p + span <= in + view_span_bytes(step_.input)) return {BufferKind::input, p - in, -1};
  // A constant is named by the model's tensor that starts at its address; views inside one
  // (none in the models so far) would need the enclosing tensor's extent.
  auto known = by_data_.find(v.data);
  if (known != by_data_.end()) {
    Constant& c = constants_[static_cast<size_t>(known->second)];
    STRATA_CHECK(span <= c.bytes, "strata_codegen: ", what, " reads ", span, " bytes of ", c.name, " which has ",
                 c.bytes, " (internal error)");
    return {BufferKind::constant, 0, known->second};
  }
  auto named = names_.find(v.data);
  STRATA_CHECK(named != names_.end(), "strata_codegen: ", what, " reads memory at ", v.data,
               " that is neither in direct mode's arena, nor the input or the model's input buffer, nor a tensor of the model: the generator "
               "cannot place it");
  Constant c;
  c.name = named->second;
  c.data = p;
  c.bytes = span;
  c.file_offset = next_file_offset_;
  next_file_offset_ += (span + 63) / 64 * 64;
  by_data_[v.data] = static_cast<int>(constants_.size());
  constants_.push_back(c);
  return {BufferKind::constant, 0, static_cast<int>(constants_.size()) - 1};
}

}  // namespace strata::codegen
