#pragma once
// Element indexing for kernels over any strides: N operands that share one logical
// shape, each with its own strides (0 for a broadcast dimension). Built on the host
// with dimensions coalesced (size-1 dims dropped, dims merged where every operand is
// contiguous across them), so contiguous operands index as one flat dimension with
// no division at all. Element k is the k-th in row-major order of the logical shape:
// dropout relies on that to draw the same mask as the CPU.
#include <array>
#include <utility>
#include <cstdint>

#include "strata/core/shape.h"
#include "strata/ops/table/op_args.h"  // STRATA_HOST_DEVICE

namespace strata::backends::cuda {

// codegen:begin cuda_kernels
template <int N>
struct Strided {
  int nd = 0;
  int64_t n = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  STRATA_HOST_DEVICE void offsets(int64_t k, int64_t* off) const {
    if (nd == 1) {
      for (int i = 0; i < N; ++i) off[i] = k * strides[i][0];
      return;
    }
    for (int i = 0; i < N; ++i) off[i] = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t s = sizes[d];
      const int64_t q = k / s;
      const int64_t r = k - q * s;
      k = q;
      for (int i = 0; i < N; ++i) off[i] += r * strides[i][d];
    }
  }
};
// codegen:end

// Coalesced indexing of `sizes` for operands with the given strides.
template <int N>
Strided<N> make_strided(const Shape& sizes, const std::array<Shape, N>& strides) {
  Strided<N> s;
  s.n = sizes.numel();
  // Walk from the innermost dimension out, merging where possible.
  int64_t rs[kMaxDims];
  int64_t rst[N][kMaxDims];
  int m = 0;
  for (int d = sizes.size() - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    bool merge = m > 0;
    for (int i = 0; i < N && merge; ++i) merge = strides[i][d] == rst[i][m - 1] * rs[m - 1];
    if (merge) {
      rs[m - 1] *= sizes[d];
    } else {
      rs[m] = sizes[d];
      for (int i = 0; i < N; ++i) rst[i][m] = strides[i][d];
      ++m;
    }
  }
  if (m == 0) {  // a single element
    s.nd = 1;
    s.sizes[0] = 1;
    for (int i = 0; i < N; ++i) s.strides[i][0] = 0;
    return s;
  }
  s.nd = m;
  for (int j = 0; j < m; ++j) {  // back to outer-to-inner order
    s.sizes[j] = rs[m - 1 - j];
    for (int i = 0; i < N; ++i) s.strides[i][j] = rst[i][m - 1 - j];
  }
  return s;
}

// As make_strided, but element k walks the operands in the memory order of operand
// `by` (dimensions sorted by its strides, largest first; ties keep the logical order),
// so a channels-last output is written contiguously and coalesces to one flat
// dimension when every operand shares its layout. k is then not the logical
// row-major index: only for kernels whose result does not depend on k.
template <int N>
Strided<N> make_strided_in_memory_order(const Shape& sizes, const std::array<Shape, N>& strides, int by) {
  const int nd = sizes.size();
  int perm[kMaxDims];
  for (int d = 0; d < nd; ++d) perm[d] = d;
  for (int i = 1; i < nd; ++i)  // stable insertion sort by descending stride
    for (int j = i; j > 0 && strides[by][perm[j]] > strides[by][perm[j - 1]]; --j) std::swap(perm[j], perm[j - 1]);
  Shape ps;
  std::array<Shape, N> pst;
  for (int d = 0; d < nd; ++d) {
    ps.push_back(sizes[perm[d]]);
    for (int i = 0; i < N; ++i) pst[i].push_back(strides[i][perm[d]]);
  }
  return make_strided<N>(ps, pst);
}

}  // namespace strata::backends::cuda
