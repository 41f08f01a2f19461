#pragma once
// The capability table shared by the CPU backends whose kernels are templates over the
// scalar (openblas: sgemm/dgemm and the loops of this folder; eigen): every op in f32 and
// f64, fill, copy and index_select in any dtype (index_add adds: f32 and f64), comparisons
// in every numeric dtype.
#include "strata/backends/api/capabilities.h"

namespace strata::backends::cpu {

inline constexpr Capabilities kEveryOpInF32AndF64 = [] {
  Capabilities c;
  c.all(kFloat).kind(ops::OpKind::memory, kAnyDType).op({ops::OpId::index_add}, kFloat).op({ops::OpId::compare}, kNumeric);
  return c;
}();

}  // namespace strata::backends::cpu
