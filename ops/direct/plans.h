#pragma once
// Direct mode: each call site is planned once per input shape. A plan binds each of its
// ops with the op's one definition (ops/bind/: the checks, the outputs and the argument
// struct, through a StaticDispatch over the plan's backend), the function the front end
// binds and runs once, so both reject the same calls with the same messages and
// allocate the same outputs (those that live within a step in the step's arena:
// step_memory.h). Running a plan is then one non-virtual call into the backend class
// per op: no checks, no allocation, no tape (only the op trace's branch, as in every
// mode: kernel_call.h).
// Backward is run explicitly, in reverse order, by whoever owns the plans (a model,
// or a hand-written network like llm.c's).
// Inputs are bound by pointer at plan time: to run on new data, write it into the
// planned input tensors (as a hand-written cuDNN network does).
#include "strata/backends/api/backend.h"
#include "strata/ops/direct/kernel_call.h"
#include "strata/ops/bind/conv.h"
#include "strata/ops/bind/linear_loss.h"
#include "strata/ops/bind/norm_pool.h"
#include "strata/ops/bind/pointwise.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/dispatch.h"

namespace strata::ops::direct {

using backends::BackendImpl;

template <BackendImpl Impl>
class Conv2dPlan {
 public:
  Tensor y, dx, dw, db;
  // z, relu: the inference epilogue (op_args.h), y = relu?(conv(x, w) + b + z); no backward follows.
  // into_z: y is z, written over (ops::conv2d_fused).
  void plan(Impl& impl, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
            const Tensor& z = Tensor(), bool relu = false, const uint64_t* w_version = nullptr, bool into_z = false) {
    impl_ = &impl;
    auto bound = bind::conv2d_fwd(StaticDispatch<Impl>(impl), x, w, b, p, z, relu, w_version, into_z);
    y = bound.out;
    fwd_ = bound.args;
    x_ = x;
    w_ = w;
    z_ = z;
    b_ = b;
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    check_conv2d_has_backward(fwd_.z.defined || fwd_.relu);
    // Validated in the order the autograd node calls the ops, so a bad grad_output
    // gets the message it gets in the other modes.
    const StaticDispatch<Impl> d(*impl_);
    dx = Tensor();
    db = Tensor();
    if (need_dx) {
      auto data = bind::conv2d_bwd_data(d, dy, w_, x_.sizes(), fwd_.p, x_.suggested_format());
      dx = data.out;
      bd_ = data.args;
    }
    auto weight = bind::conv2d_bwd_weight(d, x_, dy, w_.sizes(), fwd_.p, MemoryFormat::contiguous, w_);
    dw = weight.out;
    bw_ = weight.args;
    if (fwd_.b.defined) {
      auto bias = bind::conv2d_bwd_bias(d, dy, b_);
      db = bias.out;
      bb_ = bias.args;
    }
  }
  void forward() { run_kernel<OpId::conv2d_fwd>(*impl_, fwd_); }
  void backward() {
    if (dx.defined()) run_kernel<OpId::conv2d_bwd_data>(*impl_, bd_);
    run_kernel<OpId::conv2d_bwd_weight>(*impl_, bw_);
    if (db.defined()) run_kernel<OpId::conv2d_bwd_bias>(*impl_, bb_);
  }

 private:
  Impl* impl_ = nullptr;
  Tensor x_, w_, b_, z_;  // z_: the residual kept alive while the plan points at it
  Conv2dFwdArgs fwd_;
  Conv2dBwdDataArgs bd_;
  Conv2dBwdWeightArgs bw_;
  Conv2dBwdBiasArgs bb_;
};

template <BackendImpl Impl>
class BatchNormPlan {
 public:
  Tensor y, save_mean, save_invstd, relu_mask, dx, dgamma, dbeta;
  Tensor dz;  // fused training with a residual: its gradient (dy itself without a ReLU)
  // z, relu: fused, y = relu?(bn(x) + z) (op_args.h); in evaluation no backward follows.
  // sync: synchronised statistics (op_args.h); set_sync changes it between runs.
  void plan(Impl& impl, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
            const Tensor& running_var, bool training, double momentum, double eps, const Tensor& z = Tensor(),
            bool relu = false, ChannelSumReducer* sync = nullptr) {
    impl_ = &impl;
    auto bound = bind::batch_norm_fwd(StaticDispatch<Impl>(impl), x, gamma, beta, running_mean, running_var, training,
                                      momentum, eps, z, relu, sync);
    y = bound.out.y;
    save_mean = bound.out.save_mean;
    save_invstd = bound.out.save_invstd;
    relu_mask = bound.out.relu_mask;
    fwd_ = bound.args;
    x_ = x;
    gamma_ = gamma;
    beta_ = beta;
  }
  // The group the next forward (and its backward) synchronises over, or none: the plan's
  // buffers do not depend on it. Training only, as plan checks.
  void set_sync(ChannelSumReducer* sync) {
    STRATA_CHECK(!sync || fwd_.training, "batch_norm: sync (statistics over the replicas' rows) is for training");
    fwd_.sync = active_sync(sync);
  }
  void plan_backward(const Tensor& dy) {
    STRATA_CHECK(fwd_.training || (!fwd_.z.defined && !fwd_.relu),
                 "batch_norm: no backward through a fused evaluation (it ran with gradients off)");
    auto bound = bind::batch_norm_bwd(StaticDispatch<Impl>(*impl_), x_, dy, gamma_, save_mean, save_invstd,
                                      fwd_.training, relu_mask, fwd_.z.defined, fwd_.sync, gamma_, beta_);
    dx = bound.out.dx;
    dgamma = bound.out.dgamma;
    dbeta = bound.out.dbeta;
    dz = bound.out.dz;
    bwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::batch_norm_fwd>(*impl_, fwd_); }
  void backward() {
    bwd_.sync = fwd_.sync;  // the gradient of the forward that ran
    run_kernel<OpId::batch_norm_bwd>(*impl_, bwd_);
  }

 private:
  Impl* impl_ = nullptr;
  Tensor x_, gamma_, beta_;
  BatchNormFwdArgs fwd_;
  BatchNormBwdArgs bwd_;
};

template <BackendImpl Impl>
class ReluPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x) {
    impl_ = &impl;
    auto bound = bind::relu_fwd(StaticDispatch<Impl>(impl), x);
    y = bound.out;
    fwd_ = bound.args;
  }
  void plan_backward(const Tensor& dy) {
    auto bound = bind::relu_bwd(StaticDispatch<Impl>(*impl_), y, dy);
    dx = bound.out;
    bwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::relu_fwd>(*impl_, fwd_); }
  void backward() { run_kernel<OpId::relu_bwd>(*impl_, bwd_); }

 private:
  Impl* impl_ = nullptr;
  ReluFwdArgs fwd_;
  ReluBwdArgs bwd_;
};

template <BackendImpl Impl>
class MaxPool2dPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x, const Pool2dParams& p) {
    impl_ = &impl;
    auto bound = bind::max_pool2d_fwd(StaticDispatch<Impl>(impl), x, p);
    y = bound.out;
    fwd_ = bound.args;
    x_ = x;
  }
  void plan_backward(const Tensor& dy) {
    auto bound = bind::max_pool2d_bwd(StaticDispatch<Impl>(*impl_), x_, y, dy, fwd_.p);
    dx = bound.out;
    bwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::max_pool2d_fwd>(*impl_, fwd_); }
  void backward() { run_kernel<OpId::max_pool2d_bwd>(*impl_, bwd_); }

 private:
  Impl* impl_ = nullptr;
  Tensor x_;
  MaxPool2dFwdArgs fwd_;
  MaxPool2dBwdArgs bwd_;
};

template <BackendImpl Impl>
class AvgPool2dPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x, const Pool2dParams& p) {
    impl_ = &impl;
    auto bound = bind::avg_pool2d_fwd(StaticDispatch<Impl>(impl), x, p);
    y = bound.out;
    fwd_ = bound.args;
    x_ = x;
  }
  void plan_backward(const Tensor& dy) {
    auto bound = bind::avg_pool2d_bwd(StaticDispatch<Impl>(*impl_), dy, x_, fwd_.p);
    dx = bound.out;
    bwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::avg_pool2d_fwd>(*impl_, fwd_); }
  void backward() { run_kernel<OpId::avg_pool2d_bwd>(*impl_, bwd_); }

 private:
  Impl* impl_ = nullptr;
  Tensor x_;
  AvgPool2dFwdArgs fwd_;
  AvgPool2dBwdArgs bwd_;
};

template <BackendImpl Impl>
class SpaceToDepthPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x, const SpaceToDepthParams& p) {
    impl_ = &impl;
    auto bound = bind::space_to_depth_fwd(StaticDispatch<Impl>(impl), x, p);
    y = bound.out;
    fwd_ = bound.args;
    x_ = x;
  }
  // Into a buffer of the caller's when given (a parameter's gradient, planned_grad).
  void plan_backward(const Tensor& dy, const Tensor& into = Tensor()) {
    auto bound = bind::space_to_depth_bwd(StaticDispatch<Impl>(*impl_), dy, x_, fwd_.p, into);
    dx = bound.out;
    bwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::space_to_depth_fwd>(*impl_, fwd_); }
  void backward() { run_kernel<OpId::space_to_depth_bwd>(*impl_, bwd_); }

 private:
  Impl* impl_ = nullptr;
  Tensor x_;
  SpaceToDepthArgs fwd_;
  SpaceToDepthBwdArgs bwd_;
};

// A convolution of pixel blocks: x and w to their blocks (qx, qw; ops::space_to_depth), a
// convolution (p) over them; backward through both rearrangements' adjoints, w's gradient
// into its gradient's home as Conv2dPlan's (nn::Conv2d's space-to-depth form).
template <BackendImpl Impl>
class SpaceToDepthConv2dPlan {
 public:
  Tensor y, dx, dw, db;
  void plan(Impl& impl, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
            const SpaceToDepthParams& qx, const SpaceToDepthParams& qw) {
    w_ = w;
    xs_.plan(impl, x, qx);
    ws_.plan(impl, w, qw);
    conv_.plan(impl, xs_.y, ws_.y, b, p);
    y = conv_.y;
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    conv_.plan_backward(dy, need_dx);
    dx = Tensor();
    if (need_dx) {
      xs_.plan_backward(conv_.dx);
      dx = xs_.dx;
    }
    ws_.plan_backward(conv_.dw, planned_grad(w_, w_.sizes(), w_.dtype()));
    dw = ws_.dx;
    db = conv_.db;
  }
  void forward() {
    xs_.forward();
    ws_.forward();
    conv_.forward();
  }
  void backward() {
    conv_.backward();
    if (dx.defined()) xs_.backward();
    ws_.backward();
  }

 private:
  Tensor w_;
  SpaceToDepthPlan<Impl> xs_, ws_;
  Conv2dPlan<Impl> conv_;
};

template <BackendImpl Impl>
class GlobalAvgPoolPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x) {
    impl_ = &impl;
    auto bound = bind::global_avg_pool_fwd(StaticDispatch<Impl>(impl), x);
    y = bound.out;
    fwd_ = bound.args;
    x_ = x;
  }
  void plan_backward(const Tensor& dy) {
    auto bound = bind::global_avg_pool_bwd(StaticDispatch<Impl>(*impl_), dy, x_);
    dx = bound.out;
    bwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::global_avg_pool_fwd>(*impl_, fwd_); }
  void backward() { run_kernel<OpId::global_avg_pool_bwd>(*impl_, bwd_); }

 private:
  Impl* impl_ = nullptr;
  Tensor x_;
  GlobalAvgPoolFwdArgs fwd_;
  GlobalAvgPoolBwdArgs bwd_;
};

// A layer norm of a product's input rows as its prologue (LinearFwdArgs::norm_eps): its weight and
// bias (optional, in the input's dtype) and epsilon.
struct NormPrologue {
  Tensor weight, bias;
  double eps = 1e-5;
};

template <BackendImpl Impl>
class LinearPlan {
 public:
  Tensor y, dx, dw, db;
  Tensor pre;  // with act: the pre-activation (ops::linear_act)
  // z (optional): a residual added to y in the product (ops::linear_add), its gradient dy, which
  // the owner routes; act (optional, not with z): y = act(x w^T + b) (ops::linear_act); norm
  // (optional, not with z; inference): x's rows layer-normalised in the product's prologue
  // (ops::linear_norm).
  void plan(Impl& impl, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z = Tensor(),
            std::optional<UnaryFn> act = std::nullopt, const NormPrologue* norm = nullptr) {
    impl_ = &impl;
    const StaticDispatch<Impl> d(impl);
    if (norm) {
      auto bound = bind::linear_norm_fwd(d, x, norm->weight, norm->bias, norm->eps, w, b, act);
      y = bound.out.result.y;
      pre = bound.out.result.pre;
      fwd_ = bound.args;
      for (int i = 0; i < 3; ++i) norm_scratch_[i] = std::move(bound.out.reads[i]);
    } else if (act) {
      auto bound = bind::linear_act_fwd(d, x, w, b, *act);
      y = bound.out.y;
      pre = bound.out.pre;
      fwd_ = bound.args;
    } else {
      auto bound = z.defined() ? bind::linear_add_fwd(d, x, w, b, z) : bind::linear_fwd(d, x, w, b);
      y = bound.out;
      fwd_ = bound.args;
    }
    x_ = x;
    w_ = w;
    b_ = b;
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    // Validated in the order the autograd node calls the ops (see Conv2dPlan).
    const StaticDispatch<Impl> d(*impl_);
    dx = Tensor();
    db = Tensor();
    if (need_dx) {
      auto data = bind::linear_bwd_data(d, dy, w_);
      dx = data.out;
      bd_ = data.args;
    }
    auto weight = bind::linear_bwd_weight(d, x_, dy, fwd_.b.defined, w_, b_);
    // bwd_weight alone does not see the weight: without bwd_data, a grad_output of
    // another width would give a dw of another shape.
    check_same_shape("linear_bwd_weight", "output", y, "grad_output", dy);
    dw = weight.out.dw;
    db = weight.out.db;
    bw_ = weight.args;
  }
  void forward() { run_kernel<OpId::linear_fwd>(*impl_, fwd_); }
  void backward() {
    if (dx.defined()) run_kernel<OpId::linear_bwd_data>(*impl_, bd_);
    run_kernel<OpId::linear_bwd_weight>(*impl_, bw_);
  }
  const Tensor& weight() const { return w_; }

 private:
  Tensor norm_scratch_[3];  // with norm: the composed form's normalised rows, mean and rstd
  Impl* impl_ = nullptr;
  Tensor x_, w_, b_;
  LinearFwdArgs fwd_;
  LinearBwdDataArgs bd_;
  LinearBwdWeightArgs bw_;
};

// The two-layer perceptron y = act(x w1^T + b1) w2^T + b2 (+ z, a residual in the second product
// whose gradient, dy, the owner routes): autograd::mlp's ops in its node's order, two linear plans
// and, between them in the backward, the gradient at the pre-activation (the derivative in the
// second product's data-gradient epilogue). Forward: the first product with the activation in its
// epilogue, then the second. Backward: the second's weight gradients, the gradient at the
// pre-activation, then the first's dx and weight gradients.
template <BackendImpl Impl>
class MlpPlan {
 public:
  LinearPlan<Impl> fc, proj;  // their dw, db: the parameters' gradients; y: proj.y, dx: fc.dx
  void plan(Impl& impl, const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
            UnaryFn act, const Tensor& z = Tensor(), const NormPrologue* norm = nullptr) {
    impl_ = &impl;
    fc.plan(impl, x, w1, b1, Tensor(), act, norm);
    proj.plan(impl, fc.y, w2, b2, z);
    act_ = act;
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    proj.plan_backward(dy, false);
    auto at_pre = bind::linear_act_bwd_data(StaticDispatch<Impl>(*impl_), dy, proj.weight(), act_, fc.pre, fc.y);
    dpre_ = at_pre.out;
    bd_act_ = at_pre.args;
    fc.plan_backward(dpre_, need_dx);
  }
  void forward() {
    fc.forward();
    proj.forward();
  }
  void backward() {
    proj.backward();
    run_kernel<OpId::linear_bwd_data>(*impl_, bd_act_);
    fc.backward();
  }

 private:
  Impl* impl_ = nullptr;
  Tensor dpre_;
  UnaryFn act_ = UnaryFn::gelu_tanh;
  LinearBwdDataArgs bd_act_;
};

// Residual add. Its backward is the identity for both inputs: the owner routes dy.
template <BackendImpl Impl>
class AddPlan {
 public:
  Tensor y;
  void plan(Impl& impl, const Tensor& a, const Tensor& b) {
    impl_ = &impl;
    auto bound = bind::add(StaticDispatch<Impl>(impl), a, b);
    y = bound.out;
    fwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::add>(*impl_, fwd_); }

 private:
  Impl* impl_ = nullptr;
  AddArgs fwd_;
};

// Softmax cross-entropy with an ignore index (op_args.h, SoftmaxXentFwdArgs); it keeps the
// per-row log-sum-exp [N] for the backward, which reads the logits again. The backward starts
// from a gradient of one, written into a planned buffer right before it (a step's memory holds
// the seed only around the loss's backward, not for the whole step); `seeded`: the caller wrote
// the seed itself (a loss scale).
template <BackendImpl Impl>
class SoftmaxXentPlan {
 public:
  Tensor loss, lse, dloss, dlogits;
  void plan(Impl& impl, const Tensor& logits, const Tensor& labels, int64_t ignore_index = kDefaultIgnoreIndex) {
    impl_ = &impl;
    const StaticDispatch<Impl> d(impl);
    auto bound = bind::softmax_xent_fwd(d, logits, labels, ignore_index);
    loss = bound.out.loss;
    lse = bound.out.lse;
    fwd_ = bound.args;
    dloss = planned_empty(Shape{}, stats_dtype(logits.dtype()), logits.device());
    seed_ = bind::fill(d, dloss, 1.0).args;
    // dlogits in the logits' layout where they are the first columns of wider rows (GPT's padded
    // vocabulary, nn::GptConfig::vocab_multiple): rows that start aligned, so the backward stores
    // and the tied head's copy of them into its padded rows move 16 bytes at a time (rows of 50,257
    // bf16 values start misaligned: 4 ms and 3.9 ms a step on an H200, against about 1 each).
    const int64_t cols = logits.size(1), ld = logits.strides()[0];  // a little padding, not any view's stride
    const bool padded = logits.strides()[1] == 1 && ld > cols && ld - cols <= (cols / 8 > 64 ? cols / 8 : 64);
    const Tensor rows = padded ? planned_empty({logits.size(0), logits.strides()[0]}, logits.dtype(), logits.device())
                                     .narrow(1, 0, logits.size(1))
                               : planned_empty(logits.sizes(), logits.dtype(), logits.device());
    auto back = bind::softmax_xent_bwd(d, logits, lse, labels, dloss, ignore_index, rows);
    dlogits = back.out;
    bwd_ = back.args;
  }
  void forward() { run_kernel<OpId::softmax_xent_fwd>(*impl_, fwd_); }
  void backward(bool seeded = false) {
    if (!seeded) run_kernel<OpId::fill>(*impl_, seed_);
    run_kernel<OpId::softmax_xent_bwd>(*impl_, bwd_);
  }

 private:
  Impl* impl_ = nullptr;
  FillArgs seed_;
  SoftmaxXentFwdArgs fwd_;
  SoftmaxXentBwdArgs bwd_;
};

// Binary cross-entropy with logits; its seed as SoftmaxXentPlan's.
template <BackendImpl Impl>
class BceLogitsPlan {
 public:
  Tensor loss, dloss, dlogits;
  void plan(Impl& impl, const Tensor& logits, const Tensor& targets) {
    impl_ = &impl;
    const StaticDispatch<Impl> d(impl);
    auto bound = bind::bce_logits_fwd(d, logits, targets);
    loss = bound.out;
    fwd_ = bound.args;
    dloss = planned_empty(Shape{}, logits.dtype(), logits.device());
    seed_ = bind::fill(d, dloss, 1.0).args;
    auto back = bind::bce_logits_bwd(d, logits, targets, dloss);
    dlogits = back.out;
    bwd_ = back.args;
  }
  void forward() { run_kernel<OpId::bce_logits_fwd>(*impl_, fwd_); }
  void backward(bool seeded = false) {
    if (!seeded) run_kernel<OpId::fill>(*impl_, seed_);
    run_kernel<OpId::bce_logits_bwd>(*impl_, bwd_);
  }

 private:
  Impl* impl_ = nullptr;
  FillArgs seed_;
  BceLogitsFwdArgs fwd_;
  BceLogitsBwdArgs bwd_;
};

}  // namespace strata::ops::direct
