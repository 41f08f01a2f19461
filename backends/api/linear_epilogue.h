#pragma once
// A linear's prologue and epilogues (op_args.h's LinearFwdArgs::norm_eps, ::act and ::z,
// LinearBwdDataArgs::act) composed of a backend's own ops, where it has no fused form (every CPU
// backend; on cuda, f32 and shapes cuBLASLt's epilogues or the few-rows kernel do not take): the
// layer norm into normed, then the product; the product into pre, then the formula; the product,
// then the residual added in place; the product into dx, then the formula's derivative in place.
// The calls report as those ops.
#include "strata/ops/table/op_args.h"

namespace strata::backends {

template <class Impl>
void linear_fwd_composed(Impl& impl, const ops::LinearFwdArgs& a) {
  if (a.norm_eps) {  // the layer norm into normed, then the product with its other epilogues
    impl.layer_norm_fwd(ops::LayerNormFwdArgs{a.x, a.norm_w, a.norm_b, a.normed, a.norm_mean, a.norm_rstd, *a.norm_eps});
    ops::LinearFwdArgs rest = a;
    rest.x = a.normed;
    rest.norm_eps.reset();
    impl.linear_fwd(rest);
    return;
  }
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
