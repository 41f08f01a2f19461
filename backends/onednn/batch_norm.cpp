// batch_norm on oneDNN's batch normalization primitive. oneDNN neither updates
// running statistics nor returns an inverse std, so the plan keeps the batch mean
// and (biased) variance in its own buffers and a loop writes save_mean,
// save_invstd and the running stats (unbiased variance, PyTorch's momentum rule).
// Backward gets the variance back from save_invstd with epsilon 0, so that
// oneDNN's 1/sqrt(var + eps) is exactly the saved invstd (the op has no eps).
// Eval mode on dense NCHW/NHWC runs a per-channel affine loop (see eval_affine).
#include <cmath>
#include <vector>

#include "strata/backends/cpu/batch_norm.h"
#include "strata/backends/cpu/elementwise.h"
#include "strata/backends/onednn/context.h"
#include "strata/backends/cpu/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using namespace onednn;  // NOLINT: this backend's internal vocabulary
using dnnl::normalization_flags;
using dnnl::prop_kind;

namespace {

float* data_of(const memory& m) { return static_cast<float*>(m.get_data_handle()); }

// A per-channel f32 parameter as oneDNN wants it ([C], dense): the user's view, or
// the plan's own buffer of `fill` when the view is absent.
Staged channel_input(const TensorView& v, int64_t c, float fill, const dnnl::engine& eng) {
  if (v.defined) return Staged::make(md_of(v), plain_1d(c), eng, true);
  Staged s;
  s.user = memory(plain_1d(c), eng);
  std::fill(data_of(s.user), data_of(s.user) + c, fill);
  return s;
}
void bind_channel(Staged& s, const TensorView& v, dnnl::stream& strm) {
  if (!v.defined) return;
  s.bind(v.data);
  s.pull(strm);
}

float at(const TensorView& v, int64_t c) { return v.ptr<const float>()[c * v.strides[0]]; }
void put(const TensorView& v, int64_t c, double value) {
  if (v.defined) v.ptr<float>()[c * v.strides[0]] = static_cast<float>(value);
}

// The per-channel loops around oneDNN's training primitives. The code between "codegen:begin"
// and "codegen:end" is also written, as it is, into the training steps codegen/ generates.
// codegen:begin train_loops
// A per-channel f32 view (gamma, statistics): element k at p[k * stride]; absent when p is null.
struct ChannelView {
  float* p = nullptr;
  int64_t stride = 1;
  float at(int64_t k) const { return p[k * stride]; }
  void put(int64_t k, double value) const {
    if (p) p[k * stride] = static_cast<float>(value);
  }
};
// After a training forward: oneDNN's batch mean and biased variance (dense [ch]) become
// save_mean, save_invstd and the running statistics (unbiased variance over the m elements
// of a channel, PyTorch's momentum rule), in double.
inline void batch_norm_train_stats(const float* mean, const float* var, int64_t ch, int64_t m, double eps,
                                   double momentum, ChannelView save_mean, ChannelView save_invstd,
                                   ChannelView running_mean, ChannelView running_var) {
  const double unbias = m > 1 ? static_cast<double>(m) / static_cast<double>(m - 1) : 1.0;
  for (int64_t k = 0; k < ch; ++k) {
    save_mean.put(k, mean[k]);
    save_invstd.put(k, 1.0 / std::sqrt(static_cast<double>(var[k]) + eps));
    if (running_mean.p) running_mean.put(k, (1.0 - momentum) * running_mean.at(k) + momentum * mean[k]);
    if (running_var.p) running_var.put(k, (1.0 - momentum) * running_var.at(k) + momentum * var[k] * unbias);
  }
}
// Before a backward: its mean and variance from the saved mean and inverse std; the primitive
// runs with epsilon 0, so that its 1/sqrt(var + eps) is exactly the saved invstd.
inline void batch_norm_bwd_stats(ChannelView save_mean, ChannelView save_invstd, int64_t ch, float* mean,
                                 float* var) {
  for (int64_t k = 0; k < ch; ++k) {
    const double invstd = save_invstd.at(k);
    mean[k] = save_mean.at(k);
    var[k] = static_cast<float>(1.0 / (invstd * invstd));
  }
}
// After a backward: its scale and shift gradients (dense [ch]) into dgamma and dbeta.
inline void batch_norm_param_grads(const float* dscale, const float* dshift, int64_t ch, ChannelView dgamma,
                                   ChannelView dbeta) {
  for (int64_t k = 0; k < ch; ++k) {
    dgamma.put(k, dscale[k]);
    dbeta.put(k, dshift[k]);
  }
}
// codegen:end

ChannelView channel(const TensorView& v) { return v.defined ? ChannelView{v.ptr<float>(), v.strides[0]} : ChannelView{}; }

const normalization_flags kAffine = normalization_flags::use_scale | normalization_flags::use_shift;

// Eval mode is a per-channel affine map, y = x * s[c] + t[c] with s = gamma * invstd
// and t = beta - mean * s. oneDNN 2.6 has only its slow non-JIT ncsp implementation for
// plain NCHW (docs/tuning.md), so dense NCHW and NHWC tensors run this loop instead, split over
// oneDNN's OpenMP threads. A fused evaluation's residual add and ReLU (op_args.h) run in
// the same pass when z has x's layout. Returns false for other layouts (oneDNN runs those).
bool eval_affine(const BatchNormFwdArgs& a) {
  const bool nchw = loops::contiguous(a.x) && loops::contiguous(a.y);
  const bool nhwc = !nchw && a.x.dim() == 4 && a.x.is_channels_last() && a.y.is_channels_last();
  if (!nchw && !nhwc) return false;
  if (a.z.defined && !(a.z.strides == a.x.strides)) return false;
  const int64_t n = a.x.sizes[0], ch = a.x.sizes[1];
  std::vector<float> s(static_cast<size_t>(ch)), t(static_cast<size_t>(ch));
  for (int64_t k = 0; k < ch; ++k) {
    const double mean = at(a.running_mean, k);
    const double invstd = 1.0 / std::sqrt(static_cast<double>(at(a.running_var, k)) + a.eps);
    const double scale = (a.gamma.defined ? at(a.gamma, k) : 1.0) * invstd;
    s[k] = static_cast<float>(scale);
    t[k] = static_cast<float>((a.beta.defined ? at(a.beta, k) : 0.0) - mean * scale);
    put(a.save_mean, k, mean);
    put(a.save_invstd, k, invstd);
  }
  const float* x = a.x.ptr<const float>();
  const float* z = a.z.defined ? a.z.ptr<const float>() : nullptr;
  const bool relu = a.relu;
  float* y = a.y.ptr<float>();
  // As the separate add and ReLU ops compute it, in f32.
  const auto finish = [z, relu](float v, int64_t i) {
    if (z) v += z[i];
    return relu ? (v > 0.f ? v : 0.f) : v;
  };
  const float* sp = s.data();
  const float* tp = t.data();
  const int64_t total = a.x.numel();
  if (nchw) {
    const int64_t planes = n * ch, inner = planes > 0 ? total / planes : 0;
#pragma omp parallel for schedule(static) if (total >= kParallelAbove)
    for (int64_t p = 0; p < planes; ++p) {
      const float sk = sp[p % ch], tk = tp[p % ch];
      const float* xp = x + p * inner;
      float* yp = y + p * inner;
      if (!z && !relu) {
        for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * sk + tk;
      } else {
        for (int64_t i = 0; i < inner; ++i) yp[i] = finish(xp[i] * sk + tk, p * inner + i);
      }
    }
  } else {
    const int64_t rows = ch > 0 ? total / ch : 0;
#pragma omp parallel for schedule(static) if (total >= kParallelAbove)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * ch;
      float* yr = y + r * ch;
      if (!z && !relu) {
        for (int64_t k = 0; k < ch; ++k) yr[k] = xr[k] * sp[k] + tp[k];
      } else {
        for (int64_t k = 0; k < ch; ++k) yr[k] = finish(xr[k] * sp[k] + tp[k], r * ch + k);
      }
    }
  }
  return true;
}

struct FwdPlan : Plan {
  dnnl::batch_normalization_forward prim;
  Staged x, y, scale, shift, mean, var;
  Args args;
};

struct BwdPlan : Plan {
  dnnl::batch_normalization_backward prim;
  Staged x, dy, dx, scale;
  memory shift, mean, var, dscale, dshift;
  Args args;
};

}  // namespace

// Synchronised (op_args.h): the shared CPU loops, which reduce between the statistics and
// the normalisation that oneDNN's primitive runs in one call.
void OneDnnBackend::batch_norm_fwd(const BatchNormFwdArgs& a) {
  observe_call(OpId::batch_norm_fwd, a);
  require_f32("batch_norm_fwd", a.x.dtype);
  if (a.sync) return loops::batch_norm_fwd(kName, a);
  if (loops::has_epilogue(a)) {  // one pass where eval_affine runs; else the batch norm, then the epilogue
    if (!a.training && !a.relu_mask.defined && a.running_mean.defined && a.running_var.defined && eval_affine(a)) return;
    plain_batch_norm_fwd(loops::without_epilogue(a));
    return loops::epilogue<float>(a);
  }
  plain_batch_norm_fwd(a);
}

void OneDnnBackend::plain_batch_norm_fwd(const BatchNormFwdArgs& a) {
  STRATA_CHECK(a.training || (a.running_mean.defined && a.running_var.defined),
               "onednn: batch_norm_fwd in eval mode needs running_mean and running_var");
  if (!a.training && eval_affine(a)) return;
  guarded("batch_norm_fwd", loops::elementwise_work(a.x.numel()), [&] {
    Context& c = *ctx_;
    const int64_t ch = a.x.sizes[1];
    Key key(OpId::batch_norm_fwd);
    key.views(a.x, a.gamma, a.beta, a.y).add(a.eps).add(static_cast<int64_t>(a.training));
    if (!a.training) key.views(a.running_mean, a.running_var);
    auto& pl = c.plan<FwdPlan>(key, [&] {
      const memory::desc x = md_of(a.x), y = md_of(a.y);
      const normalization_flags flags = a.training ? kAffine : kAffine | normalization_flags::use_global_stats;
      const dnnl::batch_normalization_forward::desc d(
          a.training ? prop_kind::forward_training : prop_kind::forward_inference, x, static_cast<float>(a.eps), flags);
      const dnnl::batch_normalization_forward::primitive_desc pd(d, c.eng);
      auto p = std::make_unique<FwdPlan>();
      p->prim = dnnl::batch_normalization_forward(pd);
      p->x = Staged::make(x, pd.src_desc(), c.eng, true);
      p->y = Staged::make(y, pd.dst_desc(), c.eng, false);
      p->scale = channel_input(a.gamma, ch, 1.f, c.eng);
      p->shift = channel_input(a.beta, ch, 0.f, c.eng);
      if (a.training) {
        p->mean.user = memory(pd.mean_desc(), c.eng);
        p->var.user = memory(pd.variance_desc(), c.eng);
      } else {
        p->mean = Staged::make(md_of(a.running_mean), pd.mean_desc(), c.eng, true);
        p->var = Staged::make(md_of(a.running_var), pd.variance_desc(), c.eng, true);
      }
      p->args = {{DNNL_ARG_SRC, p->x.arg()},         {DNNL_ARG_DST, p->y.arg()},
                 {DNNL_ARG_SCALE, p->scale.arg()},   {DNNL_ARG_SHIFT, p->shift.arg()},
                 {DNNL_ARG_MEAN, p->mean.arg()},     {DNNL_ARG_VARIANCE, p->var.arg()}};
      return p;
    });
    pl.x.bind(a.x.data);
    pl.y.bind(a.y.data);
    pl.x.pull(c.strm);
    bind_channel(pl.scale, a.gamma, c.strm);
    bind_channel(pl.shift, a.beta, c.strm);
    if (!a.training) {
      bind_channel(pl.mean, a.running_mean, c.strm);
      bind_channel(pl.var, a.running_var, c.strm);
    }
    pl.prim.execute(c.strm, pl.args);
    pl.y.push(c.strm);
    c.strm.wait();

    if (!a.training) {
      for (int64_t k = 0; k < ch; ++k) {
        put(a.save_mean, k, at(a.running_mean, k));
        put(a.save_invstd, k, 1.0 / std::sqrt(static_cast<double>(at(a.running_var, k)) + a.eps));
      }
      return;
    }
    batch_norm_train_stats(data_of(pl.mean.user), data_of(pl.var.user), ch, a.x.numel() / std::max<int64_t>(ch, 1),
                           a.eps, a.momentum, channel(a.save_mean), channel(a.save_invstd), channel(a.running_mean),
                           channel(a.running_var));
  });
}

// A fused forward's backward masks dy first (relu_mask.h), into dx where no dz is asked
// for: oneDNN's backward runs in place (diff_dst and diff_src one memory).
void OneDnnBackend::batch_norm_bwd(const BatchNormBwdArgs& fused) {
  observe_call(OpId::batch_norm_bwd, fused);
  require_f32("batch_norm_bwd", fused.x.dtype);
  if (fused.sync) return loops::batch_norm_bwd(kName, fused);
  ops::masked_batch_norm_bwd<float>(fused, [&](const BatchNormBwdArgs& a) { plain_batch_norm_bwd(a); }, true);
}

void OneDnnBackend::plain_batch_norm_bwd(const BatchNormBwdArgs& a) {
  guarded("batch_norm_bwd", loops::elementwise_work(a.x.numel()), [&] {
    Context& c = *ctx_;
    const int64_t ch = a.x.sizes[1];
    Key key(OpId::batch_norm_bwd);
    key.views(a.x, a.dy, a.gamma, a.dx).add(static_cast<int64_t>(a.training));
    auto& pl = c.plan<BwdPlan>(key, [&] {
      const memory::desc x = md_of(a.x), dx = md_of(a.dx.defined ? a.dx : a.x), dy = md_of(a.dy);
      const normalization_flags flags = a.training ? kAffine : kAffine | normalization_flags::use_global_stats;
      const dnnl::batch_normalization_forward::primitive_desc hint({prop_kind::forward_training, x, 0.f, flags},
                                                                   c.eng);
      const dnnl::batch_normalization_backward::desc d(prop_kind::backward, dx, x, 0.f, flags);
      const dnnl::batch_normalization_backward::primitive_desc pd(d, c.eng, hint);
      auto p = std::make_unique<BwdPlan>();
      p->prim = dnnl::batch_normalization_backward(pd);
      p->x = Staged::make(x, pd.src_desc(), c.eng, true);
      p->dy = Staged::make(dy, pd.diff_dst_desc(), c.eng, true);
      p->dx = Staged::make(dx, pd.diff_src_desc(), c.eng, false);
      if (!a.dx.defined) p->dx.user = memory(dx, c.eng);  // dx not wanted: the plan's own buffer
      p->scale = channel_input(a.gamma, ch, 1.f, c.eng);
      // oneDNN 2.6 checks for a shift argument in backward although it never reads it.
      p->shift = memory(plain_1d(ch), c.eng);
      std::fill(data_of(p->shift), data_of(p->shift) + ch, 0.f);
      p->mean = memory(pd.mean_desc(), c.eng);
      p->var = memory(pd.variance_desc(), c.eng);
      p->dscale = memory(plain_1d(ch), c.eng);
      p->dshift = memory(plain_1d(ch), c.eng);
      p->args = {{DNNL_ARG_SRC, p->x.arg()},           {DNNL_ARG_DIFF_DST, p->dy.arg()},
                 {DNNL_ARG_DIFF_SRC, p->dx.arg()},     {DNNL_ARG_SCALE, p->scale.arg()},
                 {DNNL_ARG_SHIFT, p->shift},           {DNNL_ARG_MEAN, p->mean},             {DNNL_ARG_VARIANCE, p->var},
                 {DNNL_ARG_DIFF_SCALE, p->dscale},     {DNNL_ARG_DIFF_SHIFT, p->dshift}};
      return p;
    });
    batch_norm_bwd_stats(channel(a.save_mean), channel(a.save_invstd), ch, data_of(pl.mean), data_of(pl.var));
    pl.x.bind(a.x.data);
    pl.dy.bind(a.dy.data);
    if (a.dx.defined) pl.dx.bind(a.dx.data);
    pl.x.pull(c.strm);
    pl.dy.pull(c.strm);
    bind_channel(pl.scale, a.gamma, c.strm);
    pl.prim.execute(c.strm, pl.args);
    pl.dx.push(c.strm);
    c.strm.wait();
    batch_norm_param_grads(data_of(pl.dscale), data_of(pl.dshift), ch, channel(a.dgamma), channel(a.dbeta));
  });
}

}  // namespace strata::backends
