#include "strata/ops/bind/linear_loss.h"
#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
Tensor linear(const D& d, const Tensor& x, const Tensor& w, const Tensor& b) {
  return run_once(d, bind::linear_fwd(d, x, w, b));
}

template <class D>
Tensor linear_bwd_data(const D& d, const Tensor& dy, const Tensor& w) {
  return run_once(d, bind::linear_bwd_data(d, dy, w));
}

template <class D>
Tensor linear_add(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z) {
  return run_once(d, bind::linear_add_fwd(d, x, w, b, z));
}

template <class D>
LinearActOut linear_act(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, UnaryFn act) {
  return run_once(d, bind::linear_act_fwd(d, x, w, b, act));
}

template <class D>
Tensor linear_norm(const D& d, const Tensor& x, const Tensor& norm_w, const Tensor& norm_b, double eps, const Tensor& w,
                   const Tensor& b, std::optional<UnaryFn> act) {
  return run_once(d, bind::linear_norm_fwd(d, x, norm_w, norm_b, eps, w, b, act)).result.y;
}

template <class D>
Tensor linear_act_bwd_data(const D& d, const Tensor& dy, const Tensor& w, UnaryFn act, const Tensor& pre,
                           const Tensor& post) {
  return run_once(d, bind::linear_act_bwd_data(d, dy, w, act, pre, post));
}

template <class D>
LinearWeightGrads linear_bwd_weight(const D& d, const Tensor& x, const Tensor& dy, bool with_bias) {
  return run_once(d, bind::linear_bwd_weight(d, x, dy, with_bias));
}

template <class D>
SoftmaxXentOut softmax_xent(const D& d, const Tensor& logits, const Tensor& labels, int64_t ignore_index) {
  return run_once(d, bind::softmax_xent_fwd(d, logits, labels, ignore_index));
}

template <class D>
Tensor softmax_xent_bwd(const D& d, const Tensor& logits, const Tensor& lse, const Tensor& labels, const Tensor& dloss,
                        int64_t ignore_index) {
  return run_once(d, bind::softmax_xent_bwd(d, logits, lse, labels, dloss, ignore_index));
}

template <class D>
Tensor bce_logits(const D& d, const Tensor& logits, const Tensor& targets) {
  return run_once(d, bind::bce_logits_fwd(d, logits, targets));
}

template <class D>
Tensor bce_logits_bwd(const D& d, const Tensor& logits, const Tensor& targets, const Tensor& dloss) {
  return run_once(d, bind::bce_logits_bwd(d, logits, targets, dloss));
}

#define STRATA_OPS_INSTANTIATE(D)                                                                        \
  template Tensor linear<D>(const D&, const Tensor&, const Tensor&, const Tensor&);                     \
  template Tensor linear_bwd_data<D>(const D&, const Tensor&, const Tensor&);                           \
  template Tensor linear_add<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&);   \
  template LinearActOut linear_act<D>(const D&, const Tensor&, const Tensor&, const Tensor&, UnaryFn);   \
  template Tensor linear_norm<D>(const D&, const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, \
                                 const Tensor&, std::optional<UnaryFn>);                                      \
  template Tensor linear_act_bwd_data<D>(const D&, const Tensor&, const Tensor&, UnaryFn, const Tensor&,  \
                                         const Tensor&);                                                 \
  template LinearWeightGrads linear_bwd_weight<D>(const D&, const Tensor&, const Tensor&, bool);       \
  template SoftmaxXentOut softmax_xent<D>(const D&, const Tensor&, const Tensor&, int64_t);             \
  template Tensor softmax_xent_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, \
                                      int64_t);                                                          \
  template Tensor bce_logits<D>(const D&, const Tensor&, const Tensor&);                                \
  template Tensor bce_logits_bwd<D>(const D&, const Tensor&, const Tensor&, const Tensor&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
