// autograd/nn_functional.h: each a call of autograd/ (recorded) or ops/ (the in-place steps) on
// the default dispatcher of its first tensor.
#include "strata/autograd/nn_functional.h"

#include "strata/autograd/default_dispatch.h"
#include "strata/autograd/functions.h"

namespace strata::functional {

namespace {
const ops::VirtualDispatch& dd(const Tensor& t) { return autograd::default_dispatch(t, "functional"); }
const Tensor& first(std::span<const Tensor> ts) {
  STRATA_CHECK(!ts.empty(), "functional: an empty list of parameters");
  return ts[0];
}
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const ops::Conv2dParams& p) {
  return autograd::conv2d(dd(x), x, w, b, p);
}
Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  return autograd::batch_norm(dd(x), x, gamma, beta, running_mean, running_var, training, momentum, eps);
}
Tensor max_pool2d(const Tensor& x, const ops::Pool2dParams& p) { return autograd::max_pool2d(dd(x), x, p); }
Tensor avg_pool2d(const Tensor& x, const ops::Pool2dParams& p) { return autograd::avg_pool2d(dd(x), x, p); }
Tensor global_avg_pool(const Tensor& x) { return autograd::global_avg_pool(dd(x), x); }
Tensor space_to_depth(const Tensor& x, const ops::SpaceToDepthParams& p) {
  return autograd::space_to_depth(dd(x), x, p);
}
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return autograd::linear(dd(x), x, w, b); }
Tensor mlp(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2, ops::UnaryFn act,
           const Tensor& z) {
  return autograd::mlp(dd(x), x, w1, b1, w2, b2, act, z);
}
Tensor linear_add(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z) {
  return autograd::linear_add(dd(x), x, w, b, z);
}
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  return autograd::dropout(dd(x), x, p, seed, offset);
}
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return autograd::layer_norm(dd(x), x, weight, bias, eps);
}
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                    std::optional<double> scale) {
  return autograd::scaled_dot_product_attention(dd(q), q, k, v, is_causal, scale);
}
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index) {
  return autograd::softmax_xent(dd(logits), logits, labels, ignore_index);
}
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets) {
  return autograd::bce_logits(dd(logits), logits, targets);
}

void axpy_(const Tensor& x, const Tensor& y, double alpha) { ops::axpy_(dd(x), x, y, alpha); }

void sgd_step_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const ops::SgdOptions& o) {
  ops::sgd_step_(dd(param), param, grad, momentum_buf, o);
}
void adam_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const ops::AdamOptions& o, int64_t step) {
  ops::adam_step_(dd(param), param, grad, exp_avg, exp_avg_sq, o, step);
}
void rmsprop_step_(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& momentum_buf,
                   const Tensor& grad_avg, const ops::RmspropOptions& o) {
  ops::rmsprop_step_(dd(param), param, grad, square_avg, momentum_buf, grad_avg, o);
}
void adagrad_step_(const Tensor& param, const Tensor& grad, const Tensor& sum, const ops::AdagradOptions& o,
                   int64_t step) {
  ops::adagrad_step_(dd(param), param, grad, sum, o, step);
}
void adadelta_step_(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                    const ops::AdadeltaOptions& o) {
  ops::adadelta_step_(dd(param), param, grad, square_avg, acc_delta, o);
}
void multi_sgd_step_(std::span<const Tensor> params, std::span<const Tensor> grads,
                     std::span<const Tensor> momentum_bufs, const ops::SgdOptions& o) {
  ops::multi_sgd_step_(dd(first(params)), params, grads, momentum_bufs, o);
}
void multi_adam_step_(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                      std::span<const Tensor> exp_avg_sqs, std::span<const int64_t> steps, const ops::AdamOptions& o) {
  ops::multi_adam_step_(dd(first(params)), params, grads, exp_avgs, exp_avg_sqs, steps, o);
}
void multi_rmsprop_step_(std::span<const Tensor> params, std::span<const Tensor> grads,
                         std::span<const Tensor> square_avgs, std::span<const Tensor> momentum_bufs,
                         std::span<const Tensor> grad_avgs, const ops::RmspropOptions& o) {
  ops::multi_rmsprop_step_(dd(first(params)), params, grads, square_avgs, momentum_bufs, grad_avgs, o);
}
void multi_adagrad_step_(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> sums,
                         std::span<const int64_t> steps, const ops::AdagradOptions& o) {
  ops::multi_adagrad_step_(dd(first(params)), params, grads, sums, steps, o);
}
void multi_adadelta_step_(std::span<const Tensor> params, std::span<const Tensor> grads,
                          std::span<const Tensor> square_avgs, std::span<const Tensor> acc_deltas,
                          const ops::AdadeltaOptions& o) {
  ops::multi_adadelta_step_(dd(first(params)), params, grads, square_avgs, acc_deltas, o);
}
void amp_update_scale_(const Tensor& grad_sums, const Tensor& state, double growth, double backoff,
                       int64_t interval) {
  ops::amp_update_scale_(dd(grad_sums), grad_sums, state, growth, backoff, interval);
}

}  // namespace strata::functional
