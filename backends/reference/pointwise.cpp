// The element-wise formulas of ops/table/pointwise.def, computed in double for f32 and f64
// (the oracle's precision), from the functors every backend instantiates.
#include "strata/backends/cpu/pointwise.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

void ReferenceBackend::unary_fwd(const UnaryFwdArgs& a) {
  ref::visit_float(a.x.dtype, "unary_fwd", [&](auto t) { loops::unary_fwd<decltype(t), double>(a); });
}
void ReferenceBackend::unary_bwd(const UnaryBwdArgs& a) {
  ref::visit_float(a.x.dtype, "unary_bwd", [&](auto t) { loops::unary_bwd<decltype(t), double>(a); });
}
void ReferenceBackend::binary_fwd(const BinaryFwdArgs& a) {
  ref::visit_float(a.a.dtype, "binary_fwd", [&](auto t) { loops::binary_fwd<decltype(t), double>(a); });
}
void ReferenceBackend::binary_bwd(const BinaryBwdArgs& a) {
  ref::visit_float(a.a.dtype, "binary_bwd", [&](auto t) { loops::binary_bwd<decltype(t), double>(a); });
}

}  // namespace strata::backends
