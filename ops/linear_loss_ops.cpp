#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
Tensor linear(const D& d, const Tensor& x, const Tensor& w, const Tensor& b) {
  const Shape out = validate_linear(d, x, w, b);
  Tensor y = Tensor::empty(out, x.dtype(), x.device());
  d.linear_fwd(LinearFwdArgs{x, w, b, y});
  return y;
}

template <class D>
Tensor linear_bwd_data(const D& d, const Tensor& dy, const Tensor& w) {
  const Shape out = validate_linear_bwd_data(d, dy, w);
  Tensor dx = Tensor::empty(out, dy.dtype(), dy.device());
  d.linear_bwd_data(LinearBwdDataArgs{dy, w, dx});
  return dx;
}

template <class D>
LinearWeightGrads linear_bwd_weight(const D& d, const Tensor& x, const Tensor& dy, bool with_bias) {
  const Shape dw = validate_linear_bwd_weight(d, x, dy);
  LinearWeightGrads g{Tensor::empty(dw, x.dtype(), x.device()),
                      with_bias ? Tensor::empty(Shape{dy.size(1)}, x.dtype(), x.device()) : Tensor()};
  d.linear_bwd_weight(LinearBwdWeightArgs{x, dy, g.dw, g.db});
  return g;
}

template <class D>
SoftmaxXentOut softmax_xent(const D& d, const Tensor& logits, const Tensor& labels, int64_t ignore_index) {
  validate_softmax_xent(d, logits, labels);
  SoftmaxXentOut out{Tensor::empty(Shape{}, stats_dtype(logits.dtype()), logits.device()),
                     Tensor::empty(Shape{logits.size(0)}, stats_dtype(logits.dtype()), logits.device())};
  d.softmax_xent_fwd(SoftmaxXentFwdArgs{logits, labels, out.loss, out.lse, ignore_index});
  return out;
}

template <class D>
Tensor softmax_xent_bwd(const D& d, const Tensor& logits, const Tensor& lse, const Tensor& labels, const Tensor& dloss,
                        int64_t ignore_index) {
  validate_softmax_xent_bwd(d, logits, lse, labels, dloss);
  Tensor dlogits = Tensor::empty(logits.sizes(), logits.dtype(), logits.device());
  d.softmax_xent_bwd(SoftmaxXentBwdArgs{logits, lse, labels, dloss, dlogits, ignore_index});
  return dlogits;
}

template <class D>
Tensor bce_logits(const D& d, const Tensor& logits, const Tensor& targets) {
  validate_bce_logits(d, logits, targets);
  Tensor loss = Tensor::empty(Shape{}, logits.dtype(), logits.device());
  d.bce_logits_fwd(BceLogitsFwdArgs{logits, targets, loss});
  return loss;
}

template <class D>
Tensor bce_logits_bwd(const D& d, const Tensor& logits, const Tensor& targets, const Tensor& dloss) {
  validate_bce_logits_bwd(d, logits, targets, dloss);
  Tensor dlogits = Tensor::empty(logits.sizes(), logits.dtype(), logits.device());
  d.bce_logits_bwd(BceLogitsBwdArgs{logits, targets, dloss, dlogits});
  return dlogits;
}

#define STRATA_OPS_INSTANTIATE(D)                                                                        \
  template Tensor linear<D>(const D&, const Tensor&, const Tensor&, const Tensor&);                     \
  template Tensor linear_bwd_data<D>(const D&, const Tensor&, const Tensor&);                           \
  template LinearWeightGrads linear_bwd_weight<D>(const D&, const Tensor&, const Tensor&, bool);       \
  template SoftmaxXentOut softmax_xent<D>(const D&, const Tensor&, const Tensor&, int64_t);             \
  template Tensor softmax_xent_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                                      int64_t);                                                          \
  template Tensor bce_logits<D>(const D&, const Tensor&, const Tensor&);                                \
  template Tensor bce_logits_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
