#pragma once
// Direct mode: each call site is planned once per input shape. The plan checks
// shapes (the same shape rules as the front end), allocates outputs and gradient
// buffers, and fills the backend's argument structs with raw pointers. Running a
// plan is then one non-virtual call into the backend class: no checks, no
// allocation, no tape (only the op trace's branch, as in every mode: kernel_call.h).
// Backward is run explicitly, in reverse order, by whoever owns the plans (a model,
// or a hand-written network like llm.c's).
// Inputs are bound by pointer at plan time: to run on new data, write it into the
// planned input tensors (as a hand-written cuDNN network does).
#include "strata/backends/api/backend.h"
#include "strata/ops/checks.h"
#include "strata/ops/direct/kernel_call.h"
#include "strata/ops/shape_rules.h"

namespace strata::ops::direct {

using backends::BackendImpl;

namespace detail {
template <BackendImpl Impl>
void check_supported(Impl& impl, OpId op, const Tensor& t) {
  STRATA_CHECK(impl.supports(op, t.dtype()), op_name(op), ": backend '", Impl::kName, "' does not support ",
               dtype_name(t.dtype()), " (", t.str(), ")");
  check_device(op_name(op), "input", t, Device{Impl::kDevice, 0}, Impl::kName);
}
}  // namespace detail

template <BackendImpl Impl>
class Conv2dPlan {
 public:
  Tensor y, dx, dw, db;
  void plan(Impl& impl, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
    impl_ = &impl;
    detail::check_supported(impl, OpId::conv2d_fwd, x);
    y = Tensor::empty_like(x, conv2d_out_shape(x, w, b, p));
    fwd_ = {x, w, b, y, p};
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    dx = Tensor();
    STRATA_CHECK(dy.sizes() == y.sizes(), "conv2d plan: grad_output ", dy.str(), " does not match output ", y.str());
    dw = Tensor::empty(fwd_.w.sizes, fwd_.w.dtype, fwd_.w.device);
    bw_ = {fwd_.x, dy, dw, fwd_.p};
    if (fwd_.b.defined) {
      db = Tensor::empty(fwd_.b.sizes, fwd_.b.dtype, fwd_.b.device);
      bb_ = {dy, db};
    }
    if (need_dx) {
      dx = Tensor::empty(fwd_.x.sizes, fwd_.x.dtype, fwd_.x.device,
                         fwd_.x.is_channels_last() && !fwd_.x.is_contiguous() ? MemoryFormat::channels_last
                                                                               : MemoryFormat::contiguous);
      bd_ = {dy, fwd_.w, dx, fwd_.p};
    }
  }
  void forward() { run_kernel(*impl_, OpId::conv2d_fwd, [&] { impl_->conv2d_fwd(fwd_); }); }
  void backward() {
    if (dx.defined()) run_kernel(*impl_, OpId::conv2d_bwd_data, [&] { impl_->conv2d_bwd_data(bd_); });
    run_kernel(*impl_, OpId::conv2d_bwd_weight, [&] { impl_->conv2d_bwd_weight(bw_); });
    if (db.defined()) run_kernel(*impl_, OpId::conv2d_bwd_bias, [&] { impl_->conv2d_bwd_bias(bb_); });
  }

 private:
  Impl* impl_ = nullptr;
  Conv2dFwdArgs fwd_;
  Conv2dBwdDataArgs bd_;
  Conv2dBwdWeightArgs bw_;
  Conv2dBwdBiasArgs bb_;
};

template <BackendImpl Impl>
class BatchNormPlan {
 public:
  Tensor y, save_mean, save_invstd, dx, dgamma, dbeta;
  void plan(Impl& impl, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
            const Tensor& running_var, bool training, double momentum, double eps) {
    impl_ = &impl;
    detail::check_supported(impl, OpId::batch_norm_fwd, x);
    const int64_t c = batch_norm_channels(x, gamma, beta, running_mean, running_var);
    y = Tensor::empty_like(x, x.sizes());
    save_mean = Tensor::empty(Shape{c}, batch_norm_param_dtype(x), x.device());
    save_invstd = Tensor::empty(Shape{c}, batch_norm_param_dtype(x), x.device());
    fwd_ = {x, gamma, beta, running_mean, running_var, y, save_mean, save_invstd};
    fwd_.training = training;
    fwd_.momentum = momentum;
    fwd_.eps = eps;
  }
  void plan_backward(const Tensor& dy) {
    STRATA_CHECK(dy.sizes() == y.sizes(), "batch_norm plan: grad_output ", dy.str(), " does not match ", y.str());
    dx = Tensor::empty_like(y, y.sizes());
    dgamma = Tensor::empty(save_mean.sizes(), save_mean.dtype(), save_mean.device());
    dbeta = Tensor::empty(save_mean.sizes(), save_mean.dtype(), save_mean.device());
    bwd_ = {fwd_.x, dy, fwd_.gamma, save_mean, save_invstd, dx, dgamma, dbeta};
    bwd_.training = fwd_.training;
  }
  void forward() { run_kernel(*impl_, OpId::batch_norm_fwd, [&] { impl_->batch_norm_fwd(fwd_); }); }
  void backward() { run_kernel(*impl_, OpId::batch_norm_bwd, [&] { impl_->batch_norm_bwd(bwd_); }); }

 private:
  Impl* impl_ = nullptr;
  BatchNormFwdArgs fwd_;
  BatchNormBwdArgs bwd_;
};

template <BackendImpl Impl>
class ReluPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x) {
    impl_ = &impl;
    detail::check_supported(impl, OpId::relu_fwd, x);
    check_float("relu", "input", x);
    y = Tensor::empty_like(x, x.sizes());
    fwd_ = {x, y};
  }
  void plan_backward(const Tensor& dy) {
    check_same_shape("relu plan", "output", y, "grad_output", dy);
    dx = Tensor::empty_like(y, y.sizes());
    bwd_ = {y, dy, dx};
  }
  void forward() { run_kernel(*impl_, OpId::relu_fwd, [&] { impl_->relu_fwd(fwd_); }); }
  void backward() { run_kernel(*impl_, OpId::relu_bwd, [&] { impl_->relu_bwd(bwd_); }); }

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
    detail::check_supported(impl, OpId::max_pool2d_fwd, x);
    y = Tensor::empty_like(x, pool2d_out_shape("max_pool2d", x, p));
    fwd_ = {x, y, p};
  }
  void plan_backward(const Tensor& dy) {
    check_same_shape("max_pool2d plan", "output", y, "grad_output", dy);
    dx = Tensor::empty_like(y, fwd_.x.sizes);
    bwd_ = {fwd_.x, y, dy, dx, fwd_.p};
  }
  void forward() { run_kernel(*impl_, OpId::max_pool2d_fwd, [&] { impl_->max_pool2d_fwd(fwd_); }); }
  void backward() { run_kernel(*impl_, OpId::max_pool2d_bwd, [&] { impl_->max_pool2d_bwd(bwd_); }); }

 private:
  Impl* impl_ = nullptr;
  MaxPool2dFwdArgs fwd_;
  MaxPool2dBwdArgs bwd_;
};

template <BackendImpl Impl>
class AvgPool2dPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x, const Pool2dParams& p) {
    impl_ = &impl;
    detail::check_supported(impl, OpId::avg_pool2d_fwd, x);
    y = Tensor::empty_like(x, pool2d_out_shape("avg_pool2d", x, p));
    fwd_ = {x, y, p};
  }
  void plan_backward(const Tensor& dy) {
    check_same_shape("avg_pool2d plan", "output", y, "grad_output", dy);
    dx = Tensor::empty_like(y, fwd_.x.sizes);
    bwd_ = {dy, dx, fwd_.p};
  }
  void forward() { run_kernel(*impl_, OpId::avg_pool2d_fwd, [&] { impl_->avg_pool2d_fwd(fwd_); }); }
  void backward() { run_kernel(*impl_, OpId::avg_pool2d_bwd, [&] { impl_->avg_pool2d_bwd(bwd_); }); }

 private:
  Impl* impl_ = nullptr;
  AvgPool2dFwdArgs fwd_;
  AvgPool2dBwdArgs bwd_;
};

template <BackendImpl Impl>
class GlobalAvgPoolPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x) {
    impl_ = &impl;
    detail::check_supported(impl, OpId::global_avg_pool_fwd, x);
    y = Tensor::empty(global_avg_pool_out_shape(x), x.dtype(), x.device());
    fwd_ = {x, y};
  }
  void plan_backward(const Tensor& dy) {
    check_same_shape("global_avg_pool plan", "output", y, "grad_output", dy);
    dx = Tensor::empty(fwd_.x.sizes, fwd_.x.dtype, fwd_.x.device,
                       fwd_.x.is_channels_last() && !fwd_.x.is_contiguous() ? MemoryFormat::channels_last
                                                                             : MemoryFormat::contiguous);
    bwd_ = {dy, dx};
  }
  void forward() { run_kernel(*impl_, OpId::global_avg_pool_fwd, [&] { impl_->global_avg_pool_fwd(fwd_); }); }
  void backward() { run_kernel(*impl_, OpId::global_avg_pool_bwd, [&] { impl_->global_avg_pool_bwd(bwd_); }); }

 private:
  Impl* impl_ = nullptr;
  GlobalAvgPoolFwdArgs fwd_;
  GlobalAvgPoolBwdArgs bwd_;
};

template <BackendImpl Impl>
class LinearPlan {
 public:
  Tensor y, dx, dw, db;
  void plan(Impl& impl, const Tensor& x, const Tensor& w, const Tensor& b) {
    impl_ = &impl;
    detail::check_supported(impl, OpId::linear_fwd, x);
    y = Tensor::empty(linear_out_shape(x, w, b), x.dtype(), x.device());
    fwd_ = {x, w, b, y};
  }
  void plan_backward(const Tensor& dy, bool need_dx) {
    dx = Tensor();
    check_same_shape("linear plan", "output", y, "grad_output", dy);
    dw = Tensor::empty(fwd_.w.sizes, fwd_.w.dtype, fwd_.w.device);
    if (fwd_.b.defined) db = Tensor::empty(fwd_.b.sizes, fwd_.b.dtype, fwd_.b.device);
    bw_ = {fwd_.x, dy, dw, db};
    if (need_dx) {
      dx = Tensor::empty(fwd_.x.sizes, fwd_.x.dtype, fwd_.x.device);
      bd_ = {dy, fwd_.w, dx};
    }
  }
  void forward() { run_kernel(*impl_, OpId::linear_fwd, [&] { impl_->linear_fwd(fwd_); }); }
  void backward() {
    if (dx.defined()) run_kernel(*impl_, OpId::linear_bwd_data, [&] { impl_->linear_bwd_data(bd_); });
    run_kernel(*impl_, OpId::linear_bwd_weight, [&] { impl_->linear_bwd_weight(bw_); });
  }

 private:
  Impl* impl_ = nullptr;
  LinearFwdArgs fwd_;
  LinearBwdDataArgs bd_;
  LinearBwdWeightArgs bw_;
};

// Residual add. Its backward is the identity for both inputs: the owner routes dy.
template <BackendImpl Impl>
class AddPlan {
 public:
  Tensor y;
  void plan(Impl& impl, const Tensor& a, const Tensor& b) {
    impl_ = &impl;
    detail::check_supported(impl, OpId::add, a);
    check_same_shape("add plan", "a", a, "b", b);
    y = Tensor::empty_like(a, a.sizes());
    fwd_ = {a, b, y};
  }
  void forward() { run_kernel(*impl_, OpId::add, [&] { impl_->add(fwd_); }); }

 private:
  Impl* impl_ = nullptr;
  AddArgs fwd_;
};

// Softmax cross-entropy; backward starts from a planned gradient of one.
template <BackendImpl Impl>
class SoftmaxXentPlan {
 public:
  Tensor loss, probs, dloss, dlogits;
  void plan(Impl& impl, const Tensor& logits, const Tensor& labels) {
    impl_ = &impl;
    detail::check_supported(impl, OpId::softmax_xent_fwd, logits);
    check_softmax_xent(logits, labels);
    loss = Tensor::empty(Shape{}, logits.dtype(), logits.device());
    probs = Tensor::empty(logits.sizes(), logits.dtype(), logits.device());
    dloss = Tensor::empty(Shape{}, logits.dtype(), logits.device());
    dlogits = Tensor::empty(logits.sizes(), logits.dtype(), logits.device());
    fwd_ = {logits, labels, loss, probs};
    bwd_ = {probs, labels, dloss, dlogits};
    impl.fill(FillArgs{dloss, 1.0});
  }
  void forward() { run_kernel(*impl_, OpId::softmax_xent_fwd, [&] { impl_->softmax_xent_fwd(fwd_); }); }
  void backward() { run_kernel(*impl_, OpId::softmax_xent_bwd, [&] { impl_->softmax_xent_bwd(bwd_); }); }

 private:
  Impl* impl_ = nullptr;
  SoftmaxXentFwdArgs fwd_;
  SoftmaxXentBwdArgs bwd_;
};

}  // namespace strata::ops::direct
