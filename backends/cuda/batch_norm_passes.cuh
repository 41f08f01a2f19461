#pragma once
// The passes of strata's own batch norm (batch_norm_own.cu runs them in order): the
// per-channel sums and their finish into coefficients (batch_norm_statistics.cu), then the
// element-wise apply through those coefficients (batch_norm_apply.cu). Internal to
// backends/cuda; T is float, __half or __nv_bfloat16 (each .cu instantiates its passes for
// the three), Bwd picks the backward's pass.
#include <algorithm>

#include "strata/backends/cuda/kernels.cuh"
#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

constexpr int kBnThreads = 256;

// The geometry of one batch norm: M values per channel, in `rows` rows of C
// (inner) or N planes of S per channel (outer).
struct BnShape {
  int64_t c = 0, m = 0;  // channels, values per channel
  int64_t n = 0, s = 0;  // outer: images, plane size
  bool inner = false;
};

// What the apply pass fuses. Forward: y = relu?(bn(x) + z), and the mask's bits written
// (only where V == 8: a thread's byte). Backward: dy read through the mask.
template <class T>
struct BnFusion {
  const T* z = nullptr;
  uint8_t* mask = nullptr;
  bool relu = false;
};

// The mask bits of values i0 .. i0 + V - 1 (V divides 8 and i0): one byte read.
template <int V>
__device__ __forceinline__ uint32_t mask_bits(const uint8_t* mask, int64_t i0) {
  return (static_cast<uint32_t>(mask[i0 >> 3]) >> (i0 & 7)) & ((1u << V) - 1u);
}

// A grid of (channel tiles) x (splits of the M values): `blocks_per_sm` blocks per SM
// at most, every thread at least `min_steps` rows (or values) of its split.
struct BnGrid {
  int lanes = 1;  // threads across a tile's channels (inner); 1 for NCHW
  int64_t tiles = 0, splits = 1, chunk = 0;
  dim3 dims() const { return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)); }
};
inline BnGrid bn_grid(const Context& ctx, const BnShape& g, int v, int blocks_per_sm, int min_steps) {
  BnGrid b;
  if (g.inner) {
    while (b.lanes < 32 && b.lanes * v < g.c) b.lanes *= 2;
    b.tiles = (g.c + b.lanes * v - 1) / (b.lanes * v);
  } else {
    b.tiles = g.c;  // a block per channel
  }
  const int64_t steps_per_split = int64_t{kBnThreads / (g.inner ? b.lanes : 1)} * min_steps;
  b.splits = std::max<int64_t>(1, int64_t{ctx.sm_count} * blocks_per_sm / b.tiles);
  b.splits = std::min<int64_t>({b.splits, std::max<int64_t>(1, g.m / steps_per_split), 65535});
  b.chunk = (g.m + b.splits - 1) / b.splits;
  STRATA_CHECK(b.tiles <= 0x7fffffff, "batch_norm: too many channels (", g.c, ")");
  return b;
}

// ---- batch_norm_statistics.cu --------------------------------------------------------
// The sums pass's per-channel partials in double, one pair per split of the rows:
// partial[(split*2 + j)*C + c].
struct BnSums {
  DeviceBuffer partial;
  int splits = 1;
};

// Forward (Bwd=false): sums of x - k and (x - k)^2, k the channel's first value. Backward:
// sums of dy and dy * (x - mean), dy read through `mask` when given and the masked dy
// written to `gout` if given. v: the vector width of the pointers (1 or 16 bytes' worth).
template <class T, bool Bwd>
BnSums bn_sums(Context& ctx, const T* x, const T* dy, const ops::TensorView& mean, const BnShape& g, int v,
               const uint8_t* mask = nullptr, T* gout = nullptr);

// A synchronised batch norm's exchange (op_args.h): this replica's sums from the partials,
// summed over the group by `sync` on the stream. Empty without one.
template <class T, bool Bwd>
DeviceBuffer bn_group_sums(Context& ctx, ops::ChannelSumReducer* sync, const T* x, const BnSums& s, const BnShape& g);

// The per-channel coefficients the apply pass reads, coef[4c..4c+3], and the statistics
// and parameter gradients the ops return: from the sums (the group's when `group` is not
// empty), or in eval mode from the running statistics.
template <class T>
void bn_fwd_finish(Context& ctx, const ops::BatchNormFwdArgs& a, const T* x, const BnSums& s,
                   const DeviceBuffer& group, const BnShape& g, float* coef);
void bn_bwd_finish(Context& ctx, const ops::BatchNormBwdArgs& a, const BnSums& s, const DeviceBuffer& group,
                   const BnShape& g, float* coef);

// ---- batch_norm_apply.cu -------------------------------------------------------------
// out = the forward's y (Bwd=false, dy unused) or the backward's dx, from x (and dy)
// through coef, with the fusion f; v as for bn_sums.
template <class T, bool Bwd>
void bn_apply(Context& ctx, const T* x, const T* dy, T* out, const float* coef, const BnShape& g, int v,
              const BnFusion<T>& f);

}  // namespace strata::backends::cuda
