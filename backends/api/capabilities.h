#pragma once
// What a backend runs, op by op: the dtypes and the layouts of its operands. Each
// backend writes one table in its register.cpp, mostly per op kind (the op table's
// third column) with single ops named where they differ from their kind. Everything
// that asks "does backend B run op X in dtype T" reads this table: the front end's
// and the plans' checks (Backend::supports), the tests that sweep every claim
// against the reference, and strata_train's list of precisions.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "strata/core/dtype.h"
#include "strata/ops/table/op_id.h"

namespace strata::backends {

// A set of dtypes, one bit per DType.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> dts) {
    for (DType d : dts) bits_ |= bit(d);
  }
  static constexpr DTypeSet all() {
    DTypeSet s;
    s.bits_ = (1u << kNumDTypes) - 1;
    return s;
  }
  constexpr bool contains(DType d) const { return (bits_ & bit(d)) != 0; }
  constexpr DTypeSet operator|(DTypeSet o) const { return from_bits(bits_ | o.bits_); }
  constexpr DTypeSet operator&(DTypeSet o) const { return from_bits(bits_ & o.bits_); }
  // "f32, f64, bf16" in DType order; "none" when empty.
  std::string str() const;

 private:
  static constexpr int kNumDTypes = 7;  // DType's enumerators
  static constexpr uint16_t bit(DType d) { return static_cast<uint16_t>(1u << static_cast<unsigned>(d)); }
  static constexpr DTypeSet from_bits(uint16_t b) {
    DTypeSet s;
    s.bits_ = b;
    return s;
  }
  uint16_t bits_ = 0;
};

inline constexpr DTypeSet kFloat32 = {DType::f32};
inline constexpr DTypeSet kFloat = {DType::f32, DType::f64};
inline constexpr DTypeSet kHalf = {DType::f16, DType::bf16};
inline constexpr DTypeSet kAnyDType = DTypeSet::all();
// What comparisons read on the CPU: every dtype but the half ones.
inline constexpr DTypeSet kNumeric = {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8};

// The layouts a spatial op's 4-D operands may come in: dense NCHW, dense NHWC
// (channels_last), or any other strides (slices, permutations).
enum class ViewLayout : uint8_t { nchw = 1, nhwc = 2, strided = 4 };
inline constexpr uint8_t kAllLayouts = 7;
const char* layout_name(ViewLayout l);

struct OpSupport {
  DTypeSet dtypes;
  uint8_t layouts = kAllLayouts;  // meaningful for spatial ops (ops::is_spatial)
};

class Capabilities {
 public:
  // Every op starts unsupported; rows apply in order, a later row overriding an earlier one.
  constexpr Capabilities& all(DTypeSet dts) {
    for (auto& s : ops_) s.dtypes = dts;
    return *this;
  }
  constexpr Capabilities& kind(ops::OpKind k, DTypeSet dts) {
    for (int i = 0; i < ops::kNumOps; ++i)
      if (ops::op_kind(static_cast<ops::OpId>(i)) == k) ops_[i].dtypes = dts;
    return *this;
  }
  constexpr Capabilities& op(std::initializer_list<ops::OpId> list, DTypeSet dts) {
    for (ops::OpId o : list) ops_[static_cast<int>(o)].dtypes = dts;
    return *this;
  }
  constexpr Capabilities& layouts(std::initializer_list<ops::OpId> list, uint8_t layouts) {
    for (ops::OpId o : list) ops_[static_cast<int>(o)].layouts = layouts;
    return *this;
  }
  // The backend keeps a convolution's weights in its own layout between calls while
  // ops::Conv2dFwdArgs::w_version holds (folded inference then skips a re-layout per call).
  constexpr Capabilities& keep_versioned_weights() {
    keeps_versioned_weights_ = true;
    return *this;
  }
  constexpr bool keeps_versioned_weights() const { return keeps_versioned_weights_; }
  // conv2d_fwd with y the residual z itself (the same view) adds the convolution to it:
  // y = relu?(conv(x, w) + b + y) (onednn: its sum post-op accumulates into the output,
  // so no copy of z into y comes first).
  constexpr Capabilities& accumulate_residual_in_place() {
    accumulates_residual_in_place_ = true;
    return *this;
  }
  constexpr bool accumulates_residual_in_place() const { return accumulates_residual_in_place_; }

  constexpr bool supports(ops::OpId op, DType dt) const { return ops_[static_cast<int>(op)].dtypes.contains(dt); }
  constexpr DTypeSet dtypes(ops::OpId op) const { return ops_[static_cast<int>(op)].dtypes; }
  constexpr bool accepts_every_layout(ops::OpId op) const { return ops_[static_cast<int>(op)].layouts == kAllLayouts; }
  constexpr bool accepts(ops::OpId op, ViewLayout l) const {
    return (ops_[static_cast<int>(op)].layouts & static_cast<uint8_t>(l)) != 0;
  }
  // The dtypes every op of kind `k` runs in.
  constexpr DTypeSet dtypes(ops::OpKind k) const {
    DTypeSet s = DTypeSet::all();
    for (int i = 0; i < ops::kNumOps; ++i)
      if (ops::op_kind(static_cast<ops::OpId>(i)) == k) s = s & ops_[i].dtypes;
    return s;
  }
  // One line per op: "conv2d_fwd  conv  f32, bf16  nchw nhwc strided".
  std::string table() const;

 private:
  std::array<OpSupport, ops::kNumOps> ops_{};
  bool keeps_versioned_weights_ = false;
  bool accumulates_residual_in_place_ = false;
};

}  // namespace strata::backends
