#pragma once
// A linear's epilogues (op_args.h's LinearFwdArgs::act and ::z, LinearBwdDataArgs::act) composed
// of a backend's own ops, where it has no fused form (every CPU backend; on cuda, f32 and shapes
// cuBLASLt's epilogues do not take): the product into pre, then the formula; the product, then the
// residual added in place; the product into dx, then the formula's derivative in place. The calls
// report as those ops.
#include "strata/ops/table/op_args.h"

namespace strata::backends {

template <class Impl>
void linear_fwd_composed(Impl& impl, const ops::LinearFwdArgs& a) {
  if (a.act) {
    impl.linear_fwd(ops::LinearFwdArgs{a.x, a.w, a.b, a.pre});
    impl.unary_fwd(ops::UnaryFwdArgs{a.pre, a.y, *a.act});
    return;
  }
  impl.linear_fwd(ops::LinearFwdArgs{a.x, a.w, a.b, a.y});
  impl.add(ops::AddArgs{a.y, a.z, a.y});
}

template <class Impl>
void linear_act_bwd_data_composed(Impl& impl, const ops::LinearBwdDataArgs& a) {
  impl.linear_bwd_data(ops::LinearBwdDataArgs{a.dy, a.w, a.dx});
  impl.unary_bwd(ops::UnaryBwdArgs{a.pre, a.post, a.dx, a.dx, *a.act});
}

}  // namespace strata::backends
