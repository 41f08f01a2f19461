// The element-wise formulas of ops/table/pointwise.def: the shared CPU loops, in f32 and f64.
#include "strata/backends/cpu/pointwise.h"
#include "strata/backends/eigen/eigen_backend.h"

namespace strata::backends {

STRATA_CPU_POINTWISE_MEMBERS(EigenBackend)

}  // namespace strata::backends
