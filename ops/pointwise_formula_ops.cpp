// The front end of the formulas of ops/table/pointwise.def (unary_fwd ... binary_bwd).
#include "strata/ops/bind/pointwise.h"
#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
Tensor unary(const D& d, UnaryFn fn, const Tensor& x, double p0, double p1) {
  return run_once(d, bind::unary_fwd(d, fn, x, p0, p1));
}

template <class D>
Tensor unary_bwd(const D& d, UnaryFn fn, const Tensor& x, const Tensor& y, const Tensor& dy, double p0, double p1) {
  return run_once(d, bind::unary_bwd(d, fn, x, y, dy, p0, p1));
}

template <class D>
Tensor binary(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b) {
  return run_once(d, bind::binary_fwd(d, fn, a, b));
}

template <class D>
BinaryGrads binary_bwd(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b, const Tensor& y, const Tensor& dy,
                       bool want_da, bool want_db) {
  auto bound = bind::binary_bwd(d, fn, a, b, y, dy, want_da, want_db);
  if (!want_da && !want_db) return bound.out;  // nothing asked for: no kernel
  return run_once(d, std::move(bound));
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
