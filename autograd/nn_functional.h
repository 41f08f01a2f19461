#pragma once
// The ops of the table that nn's layers, losses and optimizers run, as free functions on the
// default dispatcher (autograd/default_dispatch.h) of their first tensor's device and dtype,
// recorded on the tape where they have a backward: torch.nn.functional's calls and the
// optimizers' fused steps, for code that builds a network by hand. With the tensor API's
// methods (core/tensor.h), every op of the table is reachable without a dispatcher object.
#include <cstdint>
#include <optional>
#include <span>

#include "strata/core/tensor.h"
#include "strata/ops/adaptive_optim.h"
#include "strata/ops/table/op_args.h"

namespace strata::functional {

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(), const ops::Conv2dParams& p = {});
// Training: batch statistics, running_mean/var updated in place; evaluation: the running ones.
Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);
Tensor max_pool2d(const Tensor& x, const ops::Pool2dParams& p);
Tensor avg_pool2d(const Tensor& x, const ops::Pool2dParams& p);
Tensor global_avg_pool(const Tensor& x);
Tensor space_to_depth(const Tensor& x, const ops::SpaceToDepthParams& p);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());
// act(x w1^T + b1) w2^T + b2 as one fused op (autograd::mlp: GPT's MLP with act gelu_tanh, the
// activation in the first product's epilogue where the backend has one); x [N, in].
Tensor mlp(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
           ops::UnaryFn act = ops::UnaryFn::gelu_tanh, const Tensor& z = Tensor());
// x w^T + b + z (torch.addmm's sum), z added in the product where the backend can.
Tensor linear_add(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z);
// Identity when p == 0; the mask is drawn from (seed, offset).
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset = 0);
// logits [N, C], i64 labels [N]: the mean over the rows whose label is not ignore_index
// (torch.nn.functional.cross_entropy's rule; NaN when every row is ignored).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index = ops::kDefaultIgnoreIndex);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets);  // mean
// Over x's last dim; weight and bias [C] optional (torch.nn.functional.layer_norm).
Tensor layer_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), double eps = 1e-5);
// q [B, H, Tq, D] over k, v [B, H, Tk, D] (autograd/transformer_functions.h); scale 1 / sqrt(D)
// unless given.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

// y += alpha x in place (torch's y.add_(x, alpha=alpha)); not recorded.
void axpy_(const Tensor& x, const Tensor& y, double alpha);

// The optimizers' fused steps, in place (ops/functional.h and ops/adaptive_optim.h say what each
// argument is); the multi_ forms step a list of parameters in one call.
void sgd_step_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const ops::SgdOptions& o);
void adam_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const ops::AdamOptions& o, int64_t step);
void rmsprop_step_(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& momentum_buf,
                   const Tensor& grad_avg, const ops::RmspropOptions& o);
void adagrad_step_(const Tensor& param, const Tensor& grad, const Tensor& sum, const ops::AdagradOptions& o,
                   int64_t step);
void adadelta_step_(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                    const ops::AdadeltaOptions& o);
void multi_sgd_step_(std::span<const Tensor> params, std::span<const Tensor> grads,
                     std::span<const Tensor> momentum_bufs, const ops::SgdOptions& o);
void multi_adam_step_(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                      std::span<const Tensor> exp_avg_sqs, std::span<const int64_t> steps, const ops::AdamOptions& o);
void multi_rmsprop_step_(std::span<const Tensor> params, std::span<const Tensor> grads,
                         std::span<const Tensor> square_avgs, std::span<const Tensor> momentum_bufs,
                         std::span<const Tensor> grad_avgs, const ops::RmspropOptions& o);
void multi_adagrad_step_(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> sums,
                         std::span<const int64_t> steps, const ops::AdagradOptions& o);
void multi_adadelta_step_(std::span<const Tensor> params, std::span<const Tensor> grads,
                          std::span<const Tensor> square_avgs, std::span<const Tensor> acc_deltas,
                          const ops::AdadeltaOptions& o);
// Dynamic loss scaling's update of `state` (f64 [4]) from the gradients' sums ([P]), in place.
void amp_update_scale_(const Tensor& grad_sums, const Tensor& state, double growth = 2.0, double backoff = 0.5,
                       int64_t interval = 2000);

}  // namespace strata::functional
