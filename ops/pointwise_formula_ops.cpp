// The front end of the formulas of ops/table/pointwise.def (unary_fwd ... binary_bwd).
#include "strata/ops/broadcast.h"
#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
Tensor unary(const D& d, UnaryFn fn, const Tensor& x, double p0, double p1) {
  validate_unary(d, fn, x, p0, p1);
  Tensor y = Tensor::empty_like(x, x.sizes());
  d.unary_fwd(UnaryFwdArgs{x, y, fn, p0, p1});
  return y;
}

template <class D>
Tensor unary_bwd(const D& d, UnaryFn fn, const Tensor& x, const Tensor& y, const Tensor& dy, double p0, double p1) {
  validate_unary_bwd(d, fn, x, y, dy);
  Tensor dx = Tensor::empty_like(x, x.sizes());
  d.unary_bwd(UnaryBwdArgs{x, y, dy, dx, fn, p0, p1});
  return dx;
}

// a and b broadcast to one shape (views with stride 0 where they repeat; the kernels read any strides).
template <class D>
Tensor binary(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b) {
  const Broadcast e = broadcast(binary_name(fn), a, b);
  validate_binary(d, fn, e.a, e.b);
  Tensor y = output_like(a, b, e.sizes, a.dtype());
  d.binary_fwd(BinaryFwdArgs{e.a, e.b, y, fn});
  return y;
}

template <class D>
BinaryGrads binary_bwd(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b, const Tensor& y, const Tensor& dy,
                       bool want_da, bool want_db) {
  validate_binary_bwd(d, fn, a, b, y, dy);
  BinaryGrads g;
  if (want_da) g.da = Tensor::empty_like(a, a.sizes());
  if (want_db) g.db = Tensor::empty_like(b, b.sizes());
  if (!want_da && !want_db) return g;
  d.binary_bwd(BinaryBwdArgs{a, b, y, dy, g.da.defined() ? TensorView(g.da) : TensorView(),
                             g.db.defined() ? TensorView(g.db) : TensorView(), fn});
  return g;
}

#define STRATA_OPS_INSTANTIATE(D)                                                                        \
  template Tensor unary<D>(const D&, UnaryFn, const Tensor&, double, double);                           \
  template Tensor unary_bwd<D>(const D&, UnaryFn, const Tensor&, const Tensor&, const Tensor&, double,  \
                               double);                                                                 \
  template Tensor binary<D>(const D&, BinaryFn, const Tensor&, const Tensor&);                          \
  template BinaryGrads binary_bwd<D>(const D&, BinaryFn, const Tensor&, const Tensor&, const Tensor&,   \
                                     const Tensor&, bool, bool);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
