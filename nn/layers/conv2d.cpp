#include "strata/nn/layers/conv2d.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>
#include <vector>

#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/nn/init.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/validate.h"

namespace strata::nn {

template <class P>
Conv2d<P>::Conv2d(const P& p, int64_t in_channels, int64_t out_channels, int kernel_size, const Conv2dOptions& o)
    : p_(p), in_(in_channels), out_(out_channels), kernel_(kernel_size), fuse_epilogue_(o.fuse_epilogue) {
  STRATA_CHECK(in_channels > 0 && out_channels > 0 && kernel_size > 0 && o.groups > 0 &&
                   in_channels % o.groups == 0 && out_channels % o.groups == 0,
               "Conv2d: invalid configuration in_channels=", in_channels, " out_channels=", out_channels,
               " kernel_size=", kernel_size, " groups=", o.groups);
  cp_.stride_h = cp_.stride_w = o.stride;
  cp_.pad_h = cp_.pad_w = o.padding;
  cp_.dilation_h = cp_.dilation_w = o.dilation;
  cp_.groups = o.groups;
  const Device dev = p_.device();
  weight_ = register_parameter(
      "weight", detail::make_filled(dev, Shape{out_channels, in_channels / o.groups, kernel_size, kernel_size}, o.dtype, 0.0));
  if (o.bias) bias_ = register_parameter("bias", detail::make_filled(dev, Shape{out_channels}, o.dtype, 0.0));
  init::reset_parameters(*this);  // torch's default, so a layer is usable without a policy
}

template <class P>
std::string Conv2d<P>::extra_repr() const {
  std::string s = std::to_string(in_) + ", " + std::to_string(out_) + ", kernel_size=" + std::to_string(kernel_);
  if (cp_.stride_h != 1) s += ", stride=" + std::to_string(cp_.stride_h);
  if (cp_.pad_h != 0) s += ", padding=" + std::to_string(cp_.pad_h);
  if (cp_.dilation_h != 1) s += ", dilation=" + std::to_string(cp_.dilation_h);
  if (cp_.groups != 1) s += ", groups=" + std::to_string(cp_.groups);
  if (!bias_.defined()) s += ", bias=False";
  return s;
}

// Mixed precision: the layer computes in its input's dtype; in the tape modes f32 master
// weights are cast per call (their gradients come back in f32 through the cast).
template <class P>
Tensor Conv2d<P>::forward(const Tensor& x) {
  if (autograd::GradMode::enabled()) fold_stale_ = true;  // an optimizer step may follow
  latest_blocks_ = s2d_;
  if (s2d_) return forward_blocks(x);
  return direct_.forward(
      p_, x,
      [&](const auto& tape) {
        return autograd::conv2d(tape, x, weight_cast_(tape, weight_, x), bias_cast_(tape, bias_, x), cp_);
      },
      weight_, bias_, cp_);
}

template <class P>
bool Conv2d<P>::fuses() const {
  return fuse_epilogue_ && !autograd::GradMode::enabled();
}

template <class P>
Tensor Conv2d<P>::forward_fused(const Tensor& x, const Tensor& z, bool relu) {
  STRATA_CHECK(fuses(), "Conv2d::forward_fused: runs with gradients off and fuse_epilogue on; call forward");
  return run_fused(x, weight_, bias_, z, relu, false, cp_);
}

template <class P>
bool Conv2d<P>::space_to_depth_fits() const {
  const int s = cp_.stride_h;
  return cp_.groups == 1 && cp_.dilation_h == 1 && cp_.dilation_w == 1 && cp_.stride_w == s && s >= 2 &&
         cp_.pad_w == cp_.pad_h && in_ * s * s <= 16 && kernel_ > 1;
}

template <class P>
void Conv2d<P>::set_space_to_depth(bool on) {
  STRATA_CHECK(!on || space_to_depth_fits(), "Conv2d::set_space_to_depth: ", extra_repr(),
               " does not fit the space-to-depth form (it needs groups 1, no dilation, the same stride >= 2 and "
               "padding both ways, and at most 16 / stride^2 input channels)");
  STRATA_CHECK(!folded_w_.defined(), "Conv2d::set_space_to_depth: ", extra_repr(),
               " has folded its weights already; choose the form before the first fold");
  s2d_ = on;
}

template <class P>
void Conv2d<P>::set_folded_winograd(bool on) {
  winograd_ = on;
}

template <class P>
int64_t Conv2d<P>::block_kernel() const {
  return (kernel_ + cp_.stride_h - 1) / cp_.stride_h;
}

// The channels padded to a multiple of 8: tensor-core engines want one (12 ran 1.5x slower).
template <class P>
ops::SpaceToDepthParams Conv2d<P>::blocks(int pad, int64_t out_h, int64_t out_w) const {
  ops::SpaceToDepthParams q;
  q.block = cp_.stride_h;
  q.pad_h = q.pad_w = pad;
  q.channels = (in_ * q.block * q.block + 7) / 8 * 8;
  q.out_h = out_h;
  q.out_w = out_w;
  return q;
}

template <class P>
ops::Conv2dParams Conv2d<P>::blocks_cp() const {
  ops::Conv2dParams p = cp_;
  p.stride_h = p.stride_w = 1;
  p.pad_h = p.pad_w = 0;
  return p;
}

template <class P>
ops::Conv2dParams Conv2d<P>::folded_cp() const {
  ops::Conv2dParams p = s2d_ ? blocks_cp() : cp_;
  p.winograd = winograd_;
  return p;
}

// Output row y of the convolution reads padded rows s*y + t, t < k; with t = s*a + d that
// is block row y + a, row d inside the block: blocks y .. y + ceil(k/s) - 1 (ops::space_to_depth).
template <class P>
ops::SpaceToDepthParams Conv2d<P>::block_params(const Tensor& x) const {
  STRATA_CHECK(x.dim() == 4 && x.size(1) == in_, "Conv2d: input ", x.str(), " must be [N, ", in_, ", H, W] for ",
               extra_repr());
  const int64_t s = cp_.stride_h, span = 2 * int64_t{cp_.pad_h} - kernel_;
  STRATA_CHECK(x.size(2) + span >= 0 && x.size(3) + span >= 0, "Conv2d: input ", x.str(),
               " is smaller than the kernel of ", extra_repr());
  return blocks(cp_.pad_h, (x.size(2) + span) / s + block_kernel(), (x.size(3) + span) / s + block_kernel());
}

// The weight [out, in, k, k] as an image of `in` channels: its s x s blocks without padding
// are the rearranged weight (rearranged_for_blocks, the folded form's, computes the same).
template <class P>
ops::SpaceToDepthParams Conv2d<P>::weight_block_params() const {
  return blocks(0, block_kernel(), block_kernel());
}

template <class P>
Tensor Conv2d<P>::to_blocks(const Tensor& x) {
  const ops::SpaceToDepthParams q = block_params(x);
  return s2d_direct_.forward(p_, x, [&](const auto& tape) { return autograd::space_to_depth(tape, x, q); }, q);
}

template <class P>
Tensor Conv2d<P>::forward_blocks(const Tensor& x) {
  const ops::SpaceToDepthParams qx = block_params(x), qw = weight_block_params();
  return s2d_conv_direct_.forward(
      p_, x,
      [&](const auto& tape) {
        const Tensor xs = autograd::space_to_depth(tape, x, qx);
        const Tensor ws = autograd::space_to_depth(tape, detail::compute_cast(tape, weight_, x), qw);
        return autograd::conv2d(tape, xs, ws, detail::compute_cast(tape, bias_, x), blocks_cp());
      },
      weight_, bias_, blocks_cp(), qx, qw);
}

// w [out, in, k, k] (row-major) -> [out, channels, kb, kb] with kb = ceil(k / s):
// w'[o, (dy * s + dx) * in + c, a, b] = w[o, c, s * a + dy, s * b + dx], zero past the kernel.
template <class P>
std::vector<double> Conv2d<P>::rearranged_for_blocks(const std::vector<double>& w) const {
  const int64_t s = cp_.stride_h, k = kernel_, kb = block_kernel(), ch = weight_block_params().channels;
  std::vector<double> r(static_cast<size_t>(out_ * ch * kb * kb), 0.0);
  for (int64_t o = 0; o < out_; ++o)
    for (int64_t c = 0; c < in_; ++c)
      for (int64_t u = 0; u < k; ++u)
        for (int64_t v = 0; v < k; ++v) {
          const int64_t a = u / s, dy = u % s, b = v / s, dx = v % s, cb = (dy * s + dx) * in_ + c;
          r[static_cast<size_t>(((o * ch + cb) * kb + a) * kb + b)] =
              w[static_cast<size_t>(((o * in_ + c) * k + u) * k + v)];
        }
  return r;
}

template <class P>
void Conv2d<P>::fold_batch_norm(const BatchNorm2d<P>& bn) {
  STRATA_CHECK(bn.running_mean().defined() && bn.running_mean().numel() == out_, "Conv2d::fold_batch_norm: ",
               extra_repr(), " has ", out_, " output channels, the batch norm ", bn.running_mean().str());
  fold_bn_ = &bn;
  fold_stale_ = true;  // the copies are made at the first fold: a model that only trains holds none
}

template <class P>
bool Conv2d<P>::folds() const {
  return fold_bn_ != nullptr && fuse_epilogue_ && !is_training() && !autograd::GradMode::enabled();
}

template <class P>
Tensor Conv2d<P>::forward_folded(const Tensor& x, const Tensor& z, bool relu, bool z_dead) {
  STRATA_CHECK(folds(), "Conv2d::forward_folded: runs in evaluation with gradients off, after fold_batch_norm; "
               "call forward and the batch norm's forward");
  if (!fold_current()) {
    // A captured step replays without calling forward: it cannot refold, so refuse
    // rather than capture stale weights.
    STRATA_CHECK(!ops::direct::capturing(), "Conv2d::forward_folded: the weights changed since they were folded and "
                 "a graph is being captured; call eval() before the capture to fold them again");
    refold();
  }
  const Tensor input = s2d_ ? to_blocks(x) : x;
  const bool into_z = z_dead && ops::conv2d_into_z_fits(p_, input, z);
  if (!is_floating(x.dtype()) || x.dtype() == folded_w_.dtype())
    return run_fused(input, folded_w_, folded_b_, z, relu, true, folded_cp(), into_z);
  // Mixed precision: the folded parameters in x's dtype, so that no forward converts them.
  auto it = std::find_if(folded_copies_.begin(), folded_copies_.end(),
                         [&](const FoldedCopy& c) { return c.w.dtype() == x.dtype(); });
  if (it == folded_copies_.end()) {
    STRATA_CHECK(!ops::direct::capturing(), "Conv2d::forward_folded: no folded weights in ", dtype_name(x.dtype()),
                 " yet and a graph is being captured; run a forward in ", dtype_name(x.dtype()), " before the capture");
    FoldedCopy c{Tensor::empty_like(folded_w_, folded_w_.sizes(), x.dtype()),
                 Tensor::empty_like(folded_b_, folded_b_.sizes(), x.dtype())};
    copy_into(folded_w_, c.w);
    copy_into(folded_b_, c.b);
    folded_copies_.push_back(c);
    it = std::prev(folded_copies_.end());
  }
  return run_fused(input, it->w, it->b, z, relu, true, folded_cp(), into_z);
}

// Plans for the same x told apart by what they run: forward's key is 0; here bit 0 is
// set, bit 1 is the ReLU, bit 2 the folded weights, bit 3 the output written over the
// residual, the rest the residual's address.
template <class P>
Tensor Conv2d<P>::run_fused(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z, bool relu,
                            bool folded, const ops::Conv2dParams& cp, bool into_z) {
  const auto z_at = z.defined() ? reinterpret_cast<uintptr_t>(z.data_ptr()) : uintptr_t{0};
  const auto key = static_cast<int64_t>((z_at << 4) | (into_z ? 8 : 0) | (folded ? 4 : 0) | (relu ? 2 : 0) | 1);
  const uint64_t* version = folded ? &fold_id_ : nullptr;  // the folded weights change only at a fold
  return direct_.forward_keyed(
      p_, x, key,
      [&](const auto& tape) {
        return autograd::conv2d_fused(tape, x, weight_cast_(tape, w, x), bias_cast_(tape, b, x), cp, z, relu, version,
                                      into_z);
      },
      w, b, cp, z, relu, version, into_z);
}

// In double on the host: one pass over the weights per fold (eval(), a load), not per
// forward, so its cost does not need a device kernel.
template <class P>
void Conv2d<P>::refold() {
  const auto host = [](const Tensor& t) {
    Tensor h = Tensor::empty(t.sizes(), DType::f64, Device::cpu());
    copy_into(t, h);
    const double* p = h.template data<double>();
    return std::vector<double>(p, p + h.numel());
  };
  const BatchNorm2d<P>& bn = *fold_bn_;
  const std::vector<double> w = host(weight_), mean = host(bn.running_mean()), var = host(bn.running_var());
  const std::vector<double> b = bias_.defined() ? host(bias_) : std::vector<double>(static_cast<size_t>(out_), 0.0);
  const std::vector<double> gamma = bn.weight().defined() ? host(bn.weight()) : std::vector<double>(b.size(), 1.0);
  const std::vector<double> beta = bn.bias().defined() ? host(bn.bias()) : std::vector<double>(b.size(), 0.0);
  const size_t per = w.size() / static_cast<size_t>(out_);
  std::vector<double> fw(w.size()), fb(b.size());
  for (size_t k = 0; k < fb.size(); ++k) {
    const double s = gamma[k] / std::sqrt(var[k] + bn.options().eps);
    for (size_t i = k * per; i < (k + 1) * per; ++i) fw[i] = w[i] * s;
    fb[k] = beta[k] + (b[k] - mean[k]) * s;
  }
  if (s2d_) fw = rearranged_for_blocks(fw);
  if (!folded_w_.defined()) {  // once: later folds write in place
    const Shape sizes = s2d_ ? Shape{out_, weight_block_params().channels, block_kernel(), block_kernel()}
                             : weight_.sizes();
    folded_w_ = Tensor::empty_like(weight_, sizes, weight_.dtype());
    folded_b_ = Tensor::empty_like(weight_, Shape{out_}, weight_.dtype());
  }
  detail::assign_host(folded_w_, fw);
  detail::assign_host(folded_b_, fb);
  for (const FoldedCopy& c : folded_copies_) {  // in place: plans and graphs stay bound to them
    copy_into(folded_w_, c.w);
    copy_into(folded_b_, c.b);
  }
  // Process-wide, never reused: a backend's copy of another model's weights that once sat
  // at the same address cannot pass for these.
  static std::atomic<uint64_t> next_fold_id{1};
  fold_id_ = next_fold_id.fetch_add(1);
  fold_stale_ = false;
  folded_from_ = fold_sources();
}

template <class P>
typename Conv2d<P>::FoldSources Conv2d<P>::fold_sources() const {
  return {weight_.stamp(), bias_.stamp(), fold_bn_->weight().stamp(), fold_bn_->bias().stamp(),
          fold_bn_->running_mean().stamp(), fold_bn_->running_var().stamp()};
}

// Graph mode's captured evaluation replays the folded copies without calling forward (and
// refuses to capture a refold): written in place here first, it captures and replays the
// current weights.
template <class P>
void Conv2d<P>::on_refresh_derived() {
  if (folds() && !fold_current()) refold();
}

template <class P>
void Conv2d<P>::on_train(bool on) {
  if (fold_bn_ == nullptr) return;
  fold_stale_ = true;
  if (!on) refold();  // now, so that a captured evaluation graph replays the new weights
}

template <class P>
void Conv2d<P>::on_memory_format(MemoryFormat) {
  // The folded weight takes the weight's layout (the one to_memory_format gave it).
  if (!folded_w_.defined()) return;
  const auto relayout = [&](Tensor& t) {
    Tensor re = Tensor::empty_like(weight_, t.sizes(), t.dtype());
    if (re.strides() == t.strides()) return;
    copy_into(t, re);
    t.set_data(re);
  };
  relayout(folded_w_);
  for (FoldedCopy& c : folded_copies_) relayout(c.w);
}

template <class P>
void Conv2d<P>::on_load() {
  if (fold_bn_ == nullptr) return;
  fold_stale_ = true;
  if (!is_training()) refold();
}

template <class P>
Tensor Conv2d<P>::backward(const Tensor& dy) {
  return latest_blocks_ ? s2d_conv_direct_.backward(*this, dy) : direct_.backward(*this, dy);
}

template <class P>
int64_t Conv2d<P>::plans_made() const {
  return direct_.plans_made() + s2d_direct_.plans_made() + s2d_conv_direct_.plans_made();
}

#define STRATA_NN_INSTANTIATE(P) template class Conv2d<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
