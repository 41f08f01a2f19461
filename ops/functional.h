#pragma once
// The op front end: free functions that check their arguments once (shape rules,
// dtypes, devices, backend support), allocate outputs, and call the backend through
// a dispatch policy D (VirtualDispatch or StaticDispatch<Impl>, ops/dispatch.h).
// No autograd here: autograd/ records the tape on top of these.
// Outputs are new tensors on the backend's device, in the memory format of the
// main input. Functions ending in '_' write into their arguments.
// Instantiated for every dispatcher of the build in ops/*_ops.cpp.
#include <cstdint>
#include <span>

#include "strata/core/tensor.h"
#include "strata/ops/table/op_args.h"

namespace strata::ops {

// conv2d's signature, written once: ops::conv2d and autograd::conv2d (the same call,
// recorded) are declared and explicitly instantiated through this type. Only their two
// definitions spell the parameters again: C++ defines a function only through a
// declarator of its own.
template <class D>
using Conv2dSignature = Tensor(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
template <class D> Conv2dSignature<D> conv2d;  // a function template, declared by its type
// The convolution's inference epilogue in the same call (op_args.h): relu?(conv2d(x, w, b) + z),
// z optional with the output's sizes and dtype. No autograd: gradients must be off around it.
// w_version: Conv2dFwdArgs's (a backend may keep w in its own layout while it is the same).
// into_z: the output is z itself, written over (validate_conv2d_into_z: a backend that
// accumulates in place); for a caller that no longer needs z.
template <class D> Tensor conv2d_fused(const D& d, const Tensor& x, const Tensor& w, const Tensor& b,
                                       const Conv2dParams& p, const Tensor& z, bool relu,
                                       const uint64_t* w_version = nullptr, bool into_z = false);
template <class D> Tensor conv2d_bwd_data(const D& d, const Tensor& dy, const Tensor& w, const Shape& x_sizes,
                                          const Conv2dParams& p, MemoryFormat fmt = MemoryFormat::contiguous);
// dw in layout fmt: the weight's, so that a channels-last network's weights and their
// gradients share one layout and a convolution stages neither.
template <class D> Tensor conv2d_bwd_weight(const D& d, const Tensor& x, const Tensor& dy, const Shape& w_sizes,
                                            const Conv2dParams& p, MemoryFormat fmt = MemoryFormat::contiguous);
template <class D> Tensor conv2d_bwd_bias(const D& d, const Tensor& dy);

struct BatchNormOut {
  Tensor y, save_mean, save_invstd;
  Tensor relu_mask;  // fused training with relu: which outputs ReLU passed (relu_mask.h)
};
struct BatchNormGrads {
  Tensor dx, dgamma, dbeta;
  Tensor dz;  // the residual input's gradient, when asked for
};
// Training: normalises with batch statistics and updates running_mean/var in place.
// Either mode may fuse what follows: y = relu?(bn(x) + z) (z optional, x's sizes and
// dtype). Fused evaluation saves nothing for a backward; fused training saves the
// statistics and, with relu, the ReLU mask that batch_norm_bwd takes.
// sync (training only): the statistics of the rows of every replica of its group
// (op_args.h); a group of one is the plain batch norm.
template <class D> BatchNormOut batch_norm(const D& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const Tensor& running_mean, const Tensor& running_var, bool training,
                                           double momentum, double eps, const Tensor& z = Tensor(),
                                           bool relu = false, ChannelSumReducer* sync = nullptr);
// relu_mask: the fused forward's; want_dz: also return the gradient of its residual z;
// sync: the forward's (the gradient of the group's batch norm).
template <class D> BatchNormGrads batch_norm_bwd(const D& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                                 const Tensor& save_mean, const Tensor& save_invstd, bool training,
                                                 const Tensor& relu_mask = Tensor(), bool want_dz = false,
                                                 ChannelSumReducer* sync = nullptr);

template <class D> Tensor relu(const D& d, const Tensor& x);
template <class D> Tensor relu_bwd(const D& d, const Tensor& y, const Tensor& dy);

template <class D> Tensor max_pool2d(const D& d, const Tensor& x, const Pool2dParams& p);
template <class D> Tensor max_pool2d_bwd(const D& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                                         const Pool2dParams& p);
template <class D> Tensor avg_pool2d(const D& d, const Tensor& x, const Pool2dParams& p);
template <class D> Tensor avg_pool2d_bwd(const D& d, const Tensor& dy, const Tensor& x_like, const Pool2dParams& p);
template <class D> Tensor global_avg_pool(const D& d, const Tensor& x);
template <class D> Tensor global_avg_pool_bwd(const D& d, const Tensor& dy, const Tensor& x_like);
// x's block x block pixel blocks as channels (op_args.h); y in x's memory format.
template <class D> Tensor space_to_depth(const D& d, const Tensor& x, const SpaceToDepthParams& p);
template <class D> Tensor space_to_depth_bwd(const D& d, const Tensor& dy, const Tensor& x_like,
                                             const SpaceToDepthParams& p);

template <class D> Tensor linear(const D& d, const Tensor& x, const Tensor& w, const Tensor& b);
template <class D> Tensor linear_bwd_data(const D& d, const Tensor& dy, const Tensor& w);
// x w^T + b + z (torch.addmm's sum with the linear's operands): z read by the product where the
// backend can (cuBLASLt's C operand), else added after it.
template <class D> Tensor linear_add(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z);
// y = act(x w^T + b) with the activation as the product's epilogue (a parameterless formula of
// pointwise.def: gelu_tanh runs in cuBLASLt's GELU epilogue), and pre = x w^T + b for the backward.
struct LinearActOut {
  Tensor y, pre;
};
template <class D> LinearActOut linear_act(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, UnaryFn act);
// y = act?(LN(x) w^T + b): x's rows layer-normalised (norm_w, norm_b optional, eps) as the
// product's prologue, for inference (no tape): the few-rows kernel normalises a row as it reads it,
// elsewhere the layer norm runs first. x [N, K].
template <class D> Tensor linear_norm(const D& d, const Tensor& x, const Tensor& norm_w, const Tensor& norm_b, double eps,
                                      const Tensor& w, const Tensor& b, std::optional<UnaryFn> act = std::nullopt);
// The gradient at pre of a linear whose input was post = act(pre): act'(pre) * (dy w).
template <class D> Tensor linear_act_bwd_data(const D& d, const Tensor& dy, const Tensor& w, UnaryFn act,
                                              const Tensor& pre, const Tensor& post);
struct LinearWeightGrads {
  Tensor dw, db;
};
template <class D> LinearWeightGrads linear_bwd_weight(const D& d, const Tensor& x, const Tensor& dy, bool with_bias);

template <class D> Tensor add(const D& d, const Tensor& a, const Tensor& b);
template <class D> Tensor scale(const D& d, const Tensor& x, double alpha);
template <class D> void axpy_(const D& d, const Tensor& x, const Tensor& y, double alpha);

struct DropoutOut {
  Tensor y, mask;
};
template <class D> DropoutOut dropout(const D& d, const Tensor& x, double p, uint64_t seed, uint64_t offset);
template <class D> Tensor dropout_bwd(const D& d, const Tensor& dy, const Tensor& mask, double p);

// Softmax cross-entropy, the mean over the rows not ignored (op_args.h, SoftmaxXentFwdArgs):
// the loss and the per-row log-sum-exp the backward reads with the logits.
struct SoftmaxXentOut {
  Tensor loss, lse;
};
template <class D> SoftmaxXentOut softmax_xent(const D& d, const Tensor& logits, const Tensor& labels,
                                               int64_t ignore_index = kDefaultIgnoreIndex);
template <class D> Tensor softmax_xent_bwd(const D& d, const Tensor& logits, const Tensor& lse, const Tensor& labels,
                                           const Tensor& dloss, int64_t ignore_index = kDefaultIgnoreIndex);
template <class D> Tensor bce_logits(const D& d, const Tensor& logits, const Tensor& targets);
template <class D> Tensor bce_logits_bwd(const D& d, const Tensor& logits, const Tensor& targets,
                                         const Tensor& dloss);
// Which of the two a model trains with (nn::Loss, and its direct step ops::direct::LossStep).
enum class LossKind { cross_entropy, bce_logits };

template <class D> Tensor sum(const D& d, const Tensor& x);
template <class D> Tensor mean(const D& d, const Tensor& x);
template <class D> Tensor argmax(const D& d, const Tensor& x);
template <class D> void fill_(const D& d, const Tensor& y, double value);
template <class D> Tensor full(const D& d, const Shape& sizes, DType dt, double value);
template <class D> void copy_(const D& d, const Tensor& src, const Tensor& dst);
// A copy with another dtype/device/memory format (through the backend's copy op).
template <class D> Tensor to(const D& d, const Tensor& x, DType dt, Device dev, MemoryFormat fmt);

template <class D> void sgd_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                                  const SgdOptions& o);
template <class D> void adam_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                                   const Tensor& exp_avg_sq, const AdamOptions& o, int64_t step);
// A parameter group's steps in one call, each parameter stepped as sgd_step_ /
// adam_step_ step it (MultiSgdStepArgs): lists of equal length, momentum_bufs empty
// without momentum, Adam's step counts one per parameter.
template <class D> void multi_sgd_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                                        std::span<const Tensor> momentum_bufs, const SgdOptions& o);
template <class D> void multi_adam_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                                         std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
                                         std::span<const int64_t> steps, const AdamOptions& o);
// Dynamic loss scaling's update of `state` (f64 [4], see AmpUpdateScaleArgs) from the
// gradients' sums ([P], floating), in place.
template <class D> void amp_update_scale_(const D& d, const Tensor& grad_sums, const Tensor& state,
                                          double growth = 2.0, double backoff = 0.5, int64_t interval = 2000);

// The formulas of ops/table/pointwise.def: y = f(x) with the formula's scalar parameters, its
// gradient, y = f(a, b) (a and b of one shape) and the gradients asked for.
template <class D> Tensor unary(const D& d, UnaryFn fn, const Tensor& x, double p0 = 0.0, double p1 = 0.0);
template <class D> Tensor unary_bwd(const D& d, UnaryFn fn, const Tensor& x, const Tensor& y, const Tensor& dy,
                                    double p0 = 0.0, double p1 = 0.0);
template <class D> Tensor binary(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b);
struct BinaryGrads {
  Tensor da, db;
};
template <class D> BinaryGrads binary_bwd(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b, const Tensor& y,
                                          const Tensor& dy, bool want_da = true, bool want_db = true);
// One function per row: ops::exp(d, x), ops::clamp(d, x, lo, hi), ops::mul(d, a, b), ...
// (a row with parameters takes them after x, as many as the row says).
namespace detail {
template <class... P>
double nth_param(int i, P... p) {
  const double ps[] = {0.0, static_cast<double>(p)...};
  return i < static_cast<int>(sizeof...(P)) ? ps[i + 1] : 0.0;
}
}  // namespace detail
#define STRATA_UNARY(name, params, fwd, bwd, domain)                                           \
  template <class D, class... P>                                                               \
  Tensor name(const D& d, const Tensor& x, P... p) {                                           \
    static_assert(sizeof...(P) == (params), #name " takes " #params " scalar parameter(s)");  \
    return unary(d, UnaryFn::name, x, detail::nth_param(0, p...), detail::nth_param(1, p...)); \
  }
#define STRATA_BINARY(name, fwd, bwd_a, bwd_b, domain) \
  template <class D>                                   \
  Tensor name(const D& d, const Tensor& a, const Tensor& b) { return binary(d, BinaryFn::name, a, b); }
#include "strata/ops/table/pointwise.def"
#undef STRATA_BINARY
#undef STRATA_UNARY

}  // namespace strata::ops

#include "strata/ops/adaptive_optim.h"  // IWYU pragma: export (RMSprop, Adagrad, Adadelta)
#include "strata/ops/tensor_ops.h"      // IWYU pragma: export (the tensor API's ops)
