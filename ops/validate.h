#pragma once
// Validate-and-infer: one function per op that checks every argument (shape rule,
// dtype, device, backend support) and returns what the output needs. Its one caller is
// the op's binding (ops/bind/), which the front end runs at every call and a direct-mode
// plan makes once, through a StaticDispatch over its backend. So every dispatch mode
// accepts the same calls and rejects a bad one with the same message (cudnn-frontend's
// validate -> plan -> execute).
//
// D is a dispatcher (VirtualDispatch or StaticDispatch<Impl>): it names the backend,
// its device and what it supports. The binding allocates the outputs in the format
// Tensor::empty_like gives (the input's Tensor::suggested_format()), after the
// validation returned: an argument list that also reads an input's dtype would read
// it, undefined, before the check.
#include <span>
#include <string>
#include <utility>

#include "strata/backends/api/capabilities.h"
#include "strata/ops/checks.h"
#include "strata/ops/shape_rules.h"
#include "strata/ops/table/op_args.h"
#include "strata/ops/table/op_id.h"
#include "strata/ops/table/relu_mask.h"

namespace strata::ops {

// The layout of a 4-D operand, as the backends' capability tables name them.
inline backends::ViewLayout view_layout(const Tensor& t) {
  if (t.is_contiguous()) return backends::ViewLayout::nchw;
  return t.is_channels_last() ? backends::ViewLayout::nhwc : backends::ViewLayout::strided;
}

// A tensor argument the backend reads: defined, on the backend's device, of a dtype
// (and, for a spatial op's 4-D operands, a layout) the backend's table lists for `op`.
// `shown`: the name the messages give the op when it is not the table's (a formula of
// pointwise.def runs as unary_fwd but is called "exp" in its messages).
template <class D>
void check_input(const D& d, OpId op, std::string_view arg, const Tensor& t, std::string_view shown = {}) {
  const std::string_view name = shown.empty() ? op_name(op) : shown;
  check_defined(name, arg, t);
  check_device(name, arg, t, d.device(), d.backend_name());
  const backends::Capabilities& caps = d.capabilities();
  STRATA_CHECK(caps.supports(op, t.dtype()), name, ": backend '", d.backend_name(), "' does not support ",
               dtype_name(t.dtype()), " (", arg, " ", t.str(), ")");
  if (t.dim() == 4 && is_spatial(op_kind(op)) && !caps.accepts_every_layout(op))
    STRATA_CHECK(caps.accepts(op, view_layout(t)), name, ": backend '", d.backend_name(), "' does not take ",
                 backends::layout_name(view_layout(t)), " operands (", arg, " ", t.str(), ")");
}

// The dtype of saved per-row statistics (layer norm's mean and rstd, attention's and
// cross-entropy's log-sum-exp) for inputs of dtype `dt`: f32 for f32/f16/bf16, f64 for f64.
inline DType stats_dtype(DType dt) { return dt == DType::f64 ? DType::f64 : DType::f32; }

// Two tensor arguments of an element-wise op: defined, of the same sizes and dtype,
// each an input the backend takes (check_input). `shown`: as check_input's.
template <class D>
void check_elementwise_pair(const D& d, OpId op, std::string_view a_name, const Tensor& a, std::string_view b_name,
                            const Tensor& b, std::string_view shown = {}) {
  const std::string_view name = shown.empty() ? op_name(op) : shown;
  check_defined(name, a_name, a);
  check_defined(name, b_name, b);
  check_same_shape(name, a_name, a, b_name, b);
  check_same_dtype(name, a_name, a, b_name, b);
  check_input(d, op, a_name, a, shown);
  check_input(d, op, b_name, b, shown);
}

// ---- conv2d: forward returns y's sizes; the backward ones check the output the
// caller allocated (dx in the input's sizes, dw in the weight's).

// The inference epilogue written over its residual (ops::conv2d_fused's into_z): a backend
// that accumulates in place, and z the output's dense buffer in x's dtype and layout, apart
// from x. conv2d_into_z_fits says whether a call would pass.
inline bool dense_in_layout_of(const Tensor& z, const Tensor& x) {
  return x.suggested_format() == MemoryFormat::channels_last ? z.is_channels_last() : z.is_contiguous();
}
template <class D>
bool conv2d_into_z_fits(const D& d, const Tensor& x, const Tensor& z) {
  return d.capabilities().accumulates_residual_in_place() && z.defined() && z.dtype() == x.dtype() &&
         dense_in_layout_of(z, x) && z.data_ptr() != x.data_ptr();
}
template <class D>
void validate_conv2d_into_z(const D& d, const Tensor& x, const Tensor& z) {
  STRATA_CHECK(d.capabilities().accumulates_residual_in_place(), "conv2d: the output written over the residual "
               "needs a backend that accumulates in place (Capabilities::accumulates_residual_in_place)");
  STRATA_CHECK(z.defined(), "conv2d: the output written over the residual needs a residual");
  STRATA_CHECK(dense_in_layout_of(z, x), "conv2d: the residual ", z.str(),
               " written over must be dense in the input's layout");
  STRATA_CHECK(z.data_ptr() != x.data_ptr(), "conv2d: the residual written over must not be the input");
}

// z, relu: the inference epilogue (op_args.h), y = relu?(conv(x, w) + b + z); into_z: y
// written over z (validate_conv2d_into_z).
template <class D>
Shape validate_conv2d(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                      const Tensor& z = Tensor(), bool relu = false, bool into_z = false) {
  const Shape out = conv2d_out_shape(x, w, b, p);
  check_input(d, OpId::conv2d_fwd, "input", x);
  check_input(d, OpId::conv2d_fwd, "weight", w);
  if (b.defined()) check_input(d, OpId::conv2d_fwd, "bias", b);
  if (z.defined()) {
    STRATA_CHECK(z.sizes() == out, "conv2d: residual ", z.str(), " must have the output's sizes ", out.str(),
                 " (input ", x.str(), ", weight ", w.str(), ")");
    check_same_dtype("conv2d", "residual", z, "input", x);
    check_input(d, OpId::conv2d_fwd, "residual", z);
  }
  if (z.defined() || relu) check_float("conv2d", "input", x);
  if (into_z) validate_conv2d_into_z(d, x, z);
  return out;
}

// A convolution whose forward ran the epilogue has no backward (it is the inference form).
inline void check_conv2d_has_backward(bool epilogue) {
  STRATA_CHECK(!epilogue, "conv2d: no backward through a convolution with a fused residual add or "
               "ReLU (the inference-only form: run it with gradients off, or call the separate ops)");
}

template <class D>
void validate_conv2d_bwd_data(const D& d, const Tensor& dy, const Tensor& w, const Tensor& dx,
                              const Conv2dParams& p) {
  check_input(d, OpId::conv2d_bwd_data, "grad_output", dy);
  check_input(d, OpId::conv2d_bwd_data, "weight", w);
  check_same_dtype("conv2d_bwd_data", "grad_output", dy, "weight", w);
  STRATA_CHECK(conv2d_out_shape(dx, w, Tensor(), p) == dy.sizes(), "conv2d_bwd_data: grad_output ", dy.str(),
               " does not match the forward output for input ", dx.sizes().str(), " and weight ", w.sizes().str());
}

template <class D>
void validate_conv2d_bwd_weight(const D& d, const Tensor& x, const Tensor& dy, const Tensor& dw,
                                const Conv2dParams& p) {
  check_input(d, OpId::conv2d_bwd_weight, "input", x);
  check_input(d, OpId::conv2d_bwd_weight, "grad_output", dy);
  check_same_dtype("conv2d_bwd_weight", "grad_output", dy, "input", x);
  STRATA_CHECK(conv2d_out_shape(x, dw, Tensor(), p) == dy.sizes(), "conv2d_bwd_weight: grad_output ", dy.str(),
               " does not match the forward output for input ", x.sizes().str(), " and weight ", dw.sizes().str());
}

// The bias gradient's sizes, [C] for grad_output [N,C,H,W].
template <class D>
Shape validate_conv2d_bwd_bias(const D& d, const Tensor& dy) {
  check_rank("conv2d_bwd_bias", "grad_output", dy, 4);
  check_input(d, OpId::conv2d_bwd_bias, "grad_output", dy);
  return Shape{dy.size(1)};
}

// ---- batch norm: the channel count C (statistics are [C] of batch_norm_param_dtype).
template <class D>
int64_t validate_batch_norm(const D& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                            double eps, const Tensor& z = Tensor(), bool relu = false,
                            ChannelSumReducer* sync = nullptr) {
  const int64_t c = batch_norm_channels(x, gamma, beta, running_mean, running_var);
  STRATA_CHECK(!sync || training, "batch_norm: sync (statistics over the replicas' rows) is for training; evaluation "
               "normalises with the running statistics, pass no reducer");
  if (z.defined()) {
    check_same_shape("batch_norm", "input", x, "residual", z);
    check_same_dtype("batch_norm", "residual", z, "input", x);
    check_input(d, OpId::batch_norm_fwd, "residual", z);
  }
  if (training && (z.defined() || relu)) {
    // Fused training saves a ReLU mask over the output's memory order (relu_mask.h).
    STRATA_CHECK(dense_for_mask(x), "batch_norm: fused training needs a dense NCHW or channels-last input, got ",
                 x.str(), " with strides ", x.strides().str());
    STRATA_CHECK(!z.defined() || same_memory_order(x, z), "batch_norm: fused training needs the residual in the "
                 "input's layout, got strides ", z.strides().str(), " for input strides ", x.strides().str());
  }
  STRATA_CHECK(eps > 0 && momentum >= 0 && momentum <= 1,
               "batch_norm: eps must be > 0 and momentum in [0,1], got eps ", eps, " momentum ", momentum);
  // Synchronised over two replicas or more, the statistics span two rows at least.
  if (training && !active_sync(sync))
    STRATA_CHECK(x.numel() / c > 1, "batch_norm: training needs more than one value per channel, got input ",
                 x.str());
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"input", &x}, {"weight", &gamma},
                                {"bias", &beta}, {"running_mean", &running_mean}, {"running_var", &running_var}})
    check_input(d, OpId::batch_norm_fwd, name, *t);
  return c;
}

template <class D>
int64_t validate_batch_norm_bwd(const D& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                const Tensor& save_mean, const Tensor& save_invstd,
                                const Tensor& relu_mask = Tensor(), bool training = true,
                                ChannelSumReducer* sync = nullptr) {
  STRATA_CHECK(!sync || training, "batch_norm_bwd: sync (statistics over the replicas' rows) is for training; the "
               "backward of an evaluation takes no reducer");
  if (relu_mask.defined()) {  // the backward of a fused forward (relu_mask.h)
    check_defined("batch_norm_bwd", "grad_output", dy);
    check_dtype("batch_norm_bwd", "relu_mask", relu_mask, DType::u8);
    STRATA_CHECK(relu_mask.dim() == 1 && relu_mask.is_contiguous() && relu_mask.numel() == relu_mask_bytes(x.numel()),
                 "batch_norm_bwd: relu_mask must be a dense [", relu_mask_bytes(x.numel()), "] for input ", x.str(),
                 ", got ", relu_mask.str());
    STRATA_CHECK(dense_for_mask(x) && same_memory_order(x, dy), "batch_norm_bwd: with a relu_mask, input and "
                 "grad_output must be dense in one layout, got strides ", x.strides().str(), " and ",
                 dy.strides().str());
    check_device("batch_norm_bwd", "relu_mask", relu_mask, d.device(), d.backend_name());
  }
  check_float("batch_norm_bwd", "input", x);
  STRATA_CHECK(x.dim() == 2 || x.dim() == 4, "batch_norm_bwd: input must be [N,C] or [N,C,H,W], got ", x.str());
  check_defined("batch_norm_bwd", "grad_output", dy);
  check_same_shape("batch_norm_bwd", "input", x, "grad_output", dy);
  check_same_dtype("batch_norm_bwd", "grad_output", dy, "input", x);
  check_batch_norm_param("batch_norm_bwd", "weight", gamma, x);
  check_batch_norm_param("batch_norm_bwd", "save_mean", save_mean, x);
  check_batch_norm_param("batch_norm_bwd", "save_invstd", save_invstd, x);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"input", &x}, {"grad_output", &dy},
                                {"weight", &gamma}, {"save_mean", &save_mean}, {"save_invstd", &save_invstd}})
    check_input(d, OpId::batch_norm_bwd, name, *t);
  return x.size(1);
}

// ---- element-wise: outputs have the input's sizes.
template <class D>
void validate_relu(const D& d, const Tensor& x) {
  check_input(d, OpId::relu_fwd, "input", x);
  check_float("relu", "input", x);
}

template <class D>
void validate_relu_bwd(const D& d, const Tensor& y, const Tensor& dy) {
  check_elementwise_pair(d, OpId::relu_bwd, "output", y, "grad_output", dy);
}

template <class D>
void validate_add(const D& d, const Tensor& a, const Tensor& b) {
  check_elementwise_pair(d, OpId::add, "a", a, "b", b);
}

// ---- pooling: forward returns y's sizes; backward outputs have the input's.
template <class D>
Shape validate_max_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  const Shape out = pool2d_out_shape("max_pool2d", x, p);
  check_input(d, OpId::max_pool2d_fwd, "input", x);
  return out;
}

template <class D>
void validate_max_pool2d_bwd(const D& d, const Tensor& x, const Tensor& y, const Tensor& dy, const Pool2dParams& p) {
  const Shape out = pool2d_out_shape("max_pool2d_bwd", x, p);
  check_defined("max_pool2d_bwd", "output", y);
  check_defined("max_pool2d_bwd", "grad_output", dy);
  STRATA_CHECK(out == dy.sizes() && out == y.sizes(), "max_pool2d_bwd: grad_output ", dy.str(), " and output ",
               y.str(), " must be ", out.str(), " for input ", x.str());
  check_same_dtype("max_pool2d_bwd", "output", y, "input", x);
  check_same_dtype("max_pool2d_bwd", "grad_output", dy, "input", x);
  check_input(d, OpId::max_pool2d_bwd, "input", x);
  check_input(d, OpId::max_pool2d_bwd, "output", y);
  check_input(d, OpId::max_pool2d_bwd, "grad_output", dy);
}

template <class D>
Shape validate_avg_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  const Shape out = pool2d_out_shape("avg_pool2d", x, p);
  check_input(d, OpId::avg_pool2d_fwd, "input", x);
  return out;
}

// x_like: only its sizes are read, but the gradient is allocated on its device.
template <class D>
void validate_avg_pool2d_bwd(const D& d, const Tensor& dy, const Tensor& x_like, const Pool2dParams& p) {
  const Shape out = pool2d_out_shape("avg_pool2d_bwd", x_like, p);
  check_defined("avg_pool2d_bwd", "grad_output", dy);
  STRATA_CHECK(out == dy.sizes(), "avg_pool2d_bwd: grad_output ", dy.str(), " must be ", out.str(), " for input ",
               x_like.str());
  check_input(d, OpId::avg_pool2d_bwd, "grad_output", dy);
  check_device("avg_pool2d_bwd", "input", x_like, d.device(), d.backend_name());
}

template <class D>
Shape validate_global_avg_pool(const D& d, const Tensor& x) {
  const Shape out = global_avg_pool_out_shape(x);
  check_input(d, OpId::global_avg_pool_fwd, "input", x);
  return out;
}

template <class D>
void validate_global_avg_pool_bwd(const D& d, const Tensor& dy, const Tensor& x_like) {
  const Shape out = global_avg_pool_out_shape(x_like);
  check_defined("global_avg_pool_bwd", "grad_output", dy);
  STRATA_CHECK(out == dy.sizes(), "global_avg_pool_bwd: grad_output ", dy.str(), " must be ", out.str(),
               " for input ", x_like.str());
  check_input(d, OpId::global_avg_pool_bwd, "grad_output", dy);
  check_device("global_avg_pool_bwd", "input", x_like, d.device(), d.backend_name());
}

// ---- space_to_depth: forward returns the parameters resolved (y's sizes in them).
template <class D>
SpaceToDepthParams validate_space_to_depth(const D& d, const Tensor& x, const SpaceToDepthParams& p) {
  check_defined("space_to_depth", "input", x);
  const SpaceToDepthParams r = space_to_depth_params("space_to_depth", x, p);
  check_input(d, OpId::space_to_depth_fwd, "input", x);
  return r;
}

template <class D>
SpaceToDepthParams validate_space_to_depth_bwd(const D& d, const Tensor& dy, const Tensor& x_like,
                                               const SpaceToDepthParams& p) {
  check_defined("space_to_depth_bwd", "grad_output", dy);
  check_defined("space_to_depth_bwd", "input", x_like);
  const SpaceToDepthParams r = space_to_depth_params("space_to_depth_bwd", x_like, p);
  const Shape out = space_to_depth_out_shape(x_like, r);
  STRATA_CHECK(dy.sizes() == out, "space_to_depth_bwd: grad_output ", dy.str(), " must be ", out.str(),
               " for input ", x_like.str());
  check_input(d, OpId::space_to_depth_bwd, "grad_output", dy);
  check_device("space_to_depth_bwd", "input", x_like, d.device(), d.backend_name());
  return r;
}

// ---- linear: forward returns y's sizes, bwd_data dx's; bwd_weight's dw is [out, in].
template <class D>
Shape validate_linear(const D& d, const Tensor& x, const Tensor& w, const Tensor& b) {
  const Shape out = linear_out_shape(x, w, b);
  check_input(d, OpId::linear_fwd, "input", x);
  check_input(d, OpId::linear_fwd, "weight", w);
  if (b.defined()) check_input(d, OpId::linear_fwd, "bias", b);
  return out;
}

template <class D>
Shape validate_linear_bwd_data(const D& d, const Tensor& dy, const Tensor& w) {
  check_rank("linear_bwd_data", "grad_output", dy, 2);
  check_rank("linear_bwd_data", "weight", w, 2);
  STRATA_CHECK(dy.size(1) == w.size(0), "linear_bwd_data: grad_output ", dy.str(), " does not match weight ",
               w.str());
  check_same_dtype("linear_bwd_data", "grad_output", dy, "weight", w);
  STRATA_CHECK(dy.numel() > 0 && w.numel() > 0, "linear_bwd_data: empty grad_output ", dy.str(), " or weight ",
               w.str());
  check_input(d, OpId::linear_bwd_data, "grad_output", dy);
  check_input(d, OpId::linear_bwd_data, "weight", w);
  return Shape{dy.size(0), w.size(1)};
}

// ---- linear with a residual (LinearFwdArgs::z): linear's checks, and z of y's shape and dtype.
template <class D>
Shape validate_linear_add(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z) {
  const Shape out = validate_linear(d, x, w, b);
  check_defined("linear", "residual", z);
  STRATA_CHECK(z.sizes() == out, "linear: residual ", z.str(), " must be the output's shape ", out.str());
  check_same_dtype("linear", "residual", z, "input", x);
  check_input(d, OpId::add, "residual", z, "linear");
  return out;
}

// ---- linear with an activation epilogue (LinearFwdArgs::act): linear's checks and the formula's,
// which must take no scalar parameters; the backward's pre-activation and activation (the
// forward's input, act(pre)) are of dx's shape and dtype.
inline void check_linear_act(std::string_view op, UnaryFn act) {
  STRATA_CHECK(unary_params(act) == 0, op, ": the activation ", unary_name(act), " takes ", unary_params(act),
               " scalar parameter(s); an epilogue takes a formula without");
}

template <class D>
Shape validate_linear_act(const D& d, const Tensor& x, const Tensor& w, const Tensor& b, UnaryFn act) {
  const Shape out = validate_linear(d, x, w, b);
  check_linear_act("linear", act);
  check_input(d, OpId::unary_fwd, "input", x, unary_name(act));
  return out;
}

template <class D>
Shape validate_linear_act_bwd_data(const D& d, const Tensor& dy, const Tensor& w, UnaryFn act, const Tensor& pre,
                                   const Tensor& post) {
  const Shape out = validate_linear_bwd_data(d, dy, w);
  constexpr std::string_view op = "linear_bwd_data";
  check_linear_act(op, act);
  check_defined(op, "pre-activation", pre);
  check_defined(op, "activation", post);
  STRATA_CHECK(pre.sizes() == out && post.sizes() == out, op, ": pre-activation ", pre.str(), " and activation ",
               post.str(), " must both be ", out.str(), " (the gradient's shape)");
  check_same_dtype(op, "pre-activation", pre, "grad_output", dy);
  check_same_dtype(op, "activation", post, "grad_output", dy);
  check_input(d, OpId::unary_bwd, "pre-activation", pre, unary_name(act));
  check_input(d, OpId::unary_bwd, "activation", post, unary_name(act));
  return out;
}

template <class D>
Shape validate_linear_bwd_weight(const D& d, const Tensor& x, const Tensor& dy) {
  check_rank("linear_bwd_weight", "input", x, 2);
  check_rank("linear_bwd_weight", "grad_output", dy, 2);
  STRATA_CHECK(x.size(0) == dy.size(0), "linear_bwd_weight: input ", x.str(), " and grad_output ", dy.str(),
               " differ in batch size");
  check_same_dtype("linear_bwd_weight", "grad_output", dy, "input", x);
  STRATA_CHECK(x.numel() > 0 && dy.numel() > 0, "linear_bwd_weight: empty input ", x.str(), " or grad_output ",
               dy.str());
  check_input(d, OpId::linear_bwd_weight, "input", x);
  check_input(d, OpId::linear_bwd_weight, "grad_output", dy);
  return Shape{dy.size(1), x.size(1)};
}

// ---- dynamic loss scaling: the gradients' sums [P] and the f64 [4] state, on the backend.
template <class D>
void validate_amp_update_scale(const D& d, const Tensor& grad_sums, const Tensor& state, double growth,
                               double backoff, int64_t interval) {
  check_defined("amp_update_scale", "grad_sums", grad_sums);
  check_defined("amp_update_scale", "state", state);
  check_rank("amp_update_scale", "grad_sums", grad_sums, 1);
  check_float("amp_update_scale", "grad_sums", grad_sums);
  check_dtype("amp_update_scale", "state", state, DType::f64);
  STRATA_CHECK(state.sizes() == Shape{4}, "amp_update_scale: state must be an f64 [4] ",
               "{scale, finite steps in a row, skipped steps, 1/scale}, got ", state.str());
  STRATA_CHECK(growth >= 1.0 && backoff > 0.0 && backoff <= 1.0 && interval >= 1, "amp_update_scale: growth ", growth,
               " must be >= 1, backoff ", backoff, " in (0, 1] and interval ", interval, " >= 1");
  check_input(d, OpId::amp_update_scale, "grad_sums", grad_sums);
  check_device("amp_update_scale", "state", state, d.device(), d.backend_name());
}

// ---- copy (and dtype/layout conversion): any dtypes, the same sizes.
template <class D>
void validate_copy(const D& d, const Tensor& src, const Tensor& dst) {
  check_defined("copy", "source", src);
  check_defined("copy", "destination", dst);
  check_same_shape("copy", "source", src, "destination", dst);
  // A copy across devices runs on the backend of the non-CPU side: a CPU backend
  // cannot read or write device memory.
  const bool on_backend = d.device().is_cpu()
                              ? src.device().is_cpu() && dst.device().is_cpu()
                              : src.device().type == d.device().type || dst.device().type == d.device().type;
  STRATA_CHECK(on_backend, "copy: source (", src.str(), ") and destination (", dst.str(),
               ") cannot be copied by backend '", d.backend_name(), "', which runs on ", d.device().str(),
               d.device().is_cpu() ? " (a copy to or from a GPU runs on its GPU backend)" : "");
}

// ---- softmax cross-entropy (op_args.h, SoftmaxXentFwdArgs): the loss (and its gradient) is a
// scalar and the saved log-sum-exp [N], both in stats_dtype (f32 for f16/bf16 logits, which a
// backend reads as they are, as PyTorch's autocast computes the loss in f32), dlogits the
// logits' sizes and dtype. Label values are checked by the
// backends as they read them (xent_labels.h): labels may live on the device. Any ignore_index
// is legal (PyTorch's rule): it may even name a class, whose rows are then left out.
template <class D>
void validate_softmax_xent(const D& d, const Tensor& logits, const Tensor& labels) {
  check_softmax_xent(logits, labels);
  check_input(d, OpId::softmax_xent_fwd, "logits", logits);
  check_device("softmax_xent", "labels", labels, d.device(), d.backend_name());
}

template <class D>
void validate_softmax_xent_bwd(const D& d, const Tensor& logits, const Tensor& lse, const Tensor& labels,
                               const Tensor& dloss) {
  constexpr std::string_view op = "softmax_xent_bwd";
  check_softmax_xent(logits, labels);
  check_input(d, OpId::softmax_xent_bwd, "logits", logits);
  check_device(op, "labels", labels, d.device(), d.backend_name());
  check_defined(op, "grad_output", dloss);
  STRATA_CHECK(dloss.numel() == 1, op, ": grad_output must have one element, got ", dloss.str());
  check_dtype(op, "grad_output", dloss, stats_dtype(logits.dtype()));
  check_input(d, OpId::softmax_xent_bwd, "grad_output", dloss);
  check_defined(op, "lse", lse);
  check_dtype(op, "lse", lse, stats_dtype(logits.dtype()));
  STRATA_CHECK(lse.dim() == 1 && lse.size(0) == logits.size(0), op, ": argument 'lse' ", lse.str(),
               " is not one log-sum-exp per row of logits ", logits.str());
  check_device(op, "lse", lse, d.device(), d.backend_name());
}

// ---- binary cross-entropy with logits: loss is a scalar, dlogits has the logits' sizes.
template <class D>
void validate_bce_logits(const D& d, const Tensor& logits, const Tensor& targets) {
  check_bce_logits(logits, targets);
  check_input(d, OpId::bce_logits_fwd, "logits", logits);
  check_input(d, OpId::bce_logits_fwd, "targets", targets);
}

template <class D>
void validate_bce_logits_bwd(const D& d, const Tensor& logits, const Tensor& targets, const Tensor& dloss) {
  check_bce_logits(logits, targets);
  check_defined("bce_logits_bwd", "grad_output", dloss);
  STRATA_CHECK(dloss.numel() == 1, "bce_logits_bwd: grad_output must have one element, got ", dloss.str());
  check_same_dtype("bce_logits_bwd", "grad_output", dloss, "logits", logits);
  check_input(d, OpId::bce_logits_bwd, "logits", logits);
  check_input(d, OpId::bce_logits_bwd, "targets", targets);
  check_input(d, OpId::bce_logits_bwd, "grad_output", dloss);
}

// ---- the small ops (pointwise_ops.cpp), one place each, also for the direct plans that run them
// (ops/direct/memory_plans.h, dropout_plan.h).
template <class D>
void validate_scale(const D& d, const Tensor& x) {
  check_input(d, OpId::scale, "input", x);
}
template <class D>
void validate_axpy(const D& d, const Tensor& x, const Tensor& y) {
  check_elementwise_pair(d, OpId::axpy, "x", x, "y", y);
}
template <class D>
void validate_dropout(const D& d, const Tensor& x, double p) {
  STRATA_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got ", p);
  check_input(d, OpId::dropout_fwd, "input", x);
}
template <class D>
void validate_dropout_bwd(const D& d, const Tensor& dy, const Tensor& mask) {
  check_defined("dropout_bwd", "grad_output", dy);
  check_dtype("dropout_bwd", "mask", mask, DType::u8);
  check_same_shape("dropout_bwd", "grad_output", dy, "mask", mask);
  check_input(d, OpId::dropout_bwd, "grad_output", dy);
  check_device("dropout_bwd", "mask", mask, d.device(), d.backend_name());
}
// sum and mean of every element into a rank-0 y (given: the direct call's; checked when defined).
template <class D>
void validate_reduce_all(const D& d, OpId op, const Tensor& x, const Tensor& y = Tensor()) {
  check_input(d, op, "input", x);
  if (op == OpId::mean) STRATA_CHECK(x.numel() > 0, "mean: empty input ", x.str());
  if (!y.defined()) return;
  STRATA_CHECK(y.dim() == 0 || y.numel() == 1, op_name(op), ": output ", y.str(), " must hold one element");
  check_same_dtype(op_name(op), "input", x, "output", y);
  check_device(op_name(op), "output", y, d.device(), d.backend_name());
}
template <class D>
void validate_argmax(const D& d, const Tensor& x) {
  check_rank("argmax", "input", x, 2);
  check_input(d, OpId::argmax, "input", x);
  STRATA_CHECK(x.size(1) > 0, "argmax: no classes in ", x.str());
}
template <class D>
void validate_fill(const D& d, const Tensor& y) {
  check_input(d, OpId::fill, "output", y);
}

// ---- the formulas of pointwise.def (unary_fwd, unary_bwd, binary_fwd, binary_bwd): messages
// name the formula ("exp: ..."); the tensors are floating, on the backend's device, of a dtype
// its table lists for the op.
template <class D>
void validate_unary(const D& d, UnaryFn fn, const Tensor& x, double p0, double p1) {
  const std::string_view op = unary_name(fn);
  check_defined(op, "input", x);
  check_float(op, "input", x);
  if (fn == UnaryFn::clamp) STRATA_CHECK(p0 <= p1, "clamp: min ", p0, " is greater than max ", p1);
  check_input(d, OpId::unary_fwd, "input", x, op);
}
template <class D>
void validate_unary_bwd(const D& d, UnaryFn fn, const Tensor& x, const Tensor& y, const Tensor& dy) {
  const std::string_view op = unary_name(fn);
  check_defined(op, "input", x);
  check_float(op, "input", x);
  check_elementwise_pair(d, OpId::unary_bwd, "input", x, "grad_output", dy, op);
  check_elementwise_pair(d, OpId::unary_bwd, "input", x, "output", y, op);
}
template <class D>
void validate_binary(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b) {
  const std::string_view op = binary_name(fn);
  check_defined(op, "a", a);
  check_defined(op, "b", b);
  check_float(op, "a", a);
  check_same_shape(op, "a", a, "b", b);
  check_same_dtype(op, "a", a, "b", b);
  check_input(d, OpId::binary_fwd, "a", a, op);
  check_input(d, OpId::binary_fwd, "b", b, op);
}
template <class D>
void validate_binary_bwd(const D& d, BinaryFn fn, const Tensor& a, const Tensor& b, const Tensor& y,
                         const Tensor& dy) {
  validate_binary(d, fn, a, b);
  const std::string_view op = binary_name(fn);
  check_elementwise_pair(d, OpId::binary_bwd, "a", a, "output", y, op);
  check_elementwise_pair(d, OpId::binary_bwd, "a", a, "grad_output", dy, op);
}

}  // namespace strata::ops
