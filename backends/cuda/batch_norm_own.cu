// strata's own batch norm kernels: every channels-last batch norm, and every f16/bf16
// one (activations in f16/bf16, statistics and affine parameters in f32, as mixed
// precision wants them). cuDNN keeps f32 NCHW, where it is fast; its f32 NHWC kernels
// are several times slower than its NCHW ones (docs/tuning.md).
//
// Three passes (batch_norm_passes.cuh), each one read of the activation: per-channel sums
// (fixed-order partials in double, then a per-channel finish: deterministic, independent
// of timing), and an element-wise apply.
//
// Synchronised batch norm (op_args.h: sync): between the sums and the per-channel finish,
// this replica's sums are gathered and summed over the replicas by the reducer, enqueued
// on the stream; the apply pass is the same.
//
// Fusion (op_args.h): the apply pass adds the residual z, applies the ReLU and writes
// the ReLU mask (relu_mask.h) where a thread owns whole mask bytes (8 values: f16/bf16
// vectors); elsewhere a second pass over y does it (batch_norm_epilogue.cu). The backward's
// sums and apply passes read dy through the mask, and the sums pass writes the masked dy
// to dz, the residual's gradient.
#include "strata/backends/cuda/batch_norm_kernels.h"
#include "strata/backends/cuda/batch_norm_passes.cuh"
#include "strata/backends/cuda/cudnn_util.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types
namespace {

BnShape shape_of(const TensorView& x, Layout l) {
  BnShape g;
  g.c = x.sizes[1];
  g.n = x.sizes[0];
  g.s = x.dim() == 4 ? x.sizes[2] * x.sizes[3] : 1;
  g.m = g.n * g.s;
  g.inner = l == Layout::nhwc || g.s == 1;
  return g;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The vector width for these pointers: 16 bytes when the channel tiling allows it.
template <class T>
int vec_width(const BnShape& g, std::initializer_list<const void*> ptrs) {
  constexpr int v = 16 / sizeof(T);
  if ((g.inner ? g.c : g.s) % v != 0) return 1;
  for (const void* p : ptrs)
    if (!aligned16(p)) return 1;
  return v;
}

void check_params(const char* op, std::initializer_list<const TensorView*> params) {
  for (const TensorView* p : params)
    STRATA_CHECK(!p->defined || p->dtype == DType::f32, op, ": the cuda backend keeps batch norm parameters and "
                 "statistics in f32, got ", dtype_name(p->dtype));
}

}  // namespace

bool own_batch_norm(const TensorView& x, const Settings& s) {
  if (x.dtype != DType::f32) return true;
  // Past cuDNN's 32-bit limits: its batch norm cannot be run in pieces along the batch, whose
  // statistics it spans, and strata's kernels index in 64 bits.
  if (!fits_cudnn(x)) return true;
  return layout_of(x) == Layout::nhwc ? !s.cudnn_nhwc_batch_norm : s.own_nchw_batch_norm;
}

void batch_norm_fwd_own(Context& ctx, const BatchNormFwdArgs& a) {
  check_params("batch_norm_fwd", {&a.gamma, &a.beta, &a.running_mean, &a.running_var, &a.save_mean, &a.save_invstd});
  STRATA_CHECK(a.training || (a.running_mean.defined && a.running_var.defined),
               "batch_norm_fwd: eval mode needs running_mean and running_var");
  const Layout l = layout_of(a.x);
  Staged x = stage_in(ctx, a.x, l);
  Staged y = stage_out(ctx, a.y, l);
  Staged z;
  if (a.z.defined) z = stage_in(ctx, a.z, l);
  const BnShape g = shape_of(x.view, l);
  DeviceBuffer coef(ctx, sizeof(float) * 4 * g.c);
  bool second_pass = false;
  dispatch_float_no_f64(a.x.dtype, "batch_norm_fwd", [&](auto t) {
    using T = decltype(t);
    const T* xp = x.view.ptr<T>();
    T* yp = y.view.ptr<T>();
    const BnFusion<T> f{a.z.defined ? z.view.ptr<T>() : nullptr,
                        a.relu_mask.defined ? a.relu_mask.ptr<uint8_t>() : nullptr, a.relu};
    const int v = vec_width<T>(g, {xp, yp, f.z ? static_cast<const void*>(f.z) : xp});
    BnSums s;
    if (a.training) s = bn_sums<T, false>(ctx, xp, nullptr, TensorView{}, g, v);
    const DeviceBuffer group = bn_group_sums<T, false>(ctx, a.training ? a.sync : nullptr, xp, s, g);
    bn_fwd_finish<T>(ctx, a, xp, s, group, g, coef.as<float>());
    constexpr int kV = 16 / sizeof(T);
    // The mask's bytes need a thread's 8 values: f16/bf16 vectors. Else a second pass.
    second_pass = f.mask && !(kV == 8 && v == kV);
    bn_apply<T, false>(ctx, xp, nullptr, yp, coef.as<float>(), g, v, second_pass ? BnFusion<T>{} : f);
  });
  if (second_pass) batch_norm_epilogue(ctx, y.view, a.z.defined ? z.view : TensorView{}, a.relu_mask, a.relu);
  y.finish(ctx);
}

void batch_norm_bwd_own(Context& ctx, const BatchNormBwdArgs& a) {
  check_params("batch_norm_bwd", {&a.gamma, &a.save_mean, &a.save_invstd, &a.dgamma, &a.dbeta});
  STRATA_CHECK(a.save_mean.defined && a.save_invstd.defined, "batch_norm_bwd: needs save_mean and save_invstd");
  const Layout l = layout_of(a.x);
  Staged x = stage_in(ctx, a.x, l);
  Staged dy = stage_in(ctx, a.dy, l);
  Staged dx, dz;
  if (a.dx.defined) dx = stage_out(ctx, a.dx, l);
  if (a.dz.defined) dz = stage_out(ctx, a.dz, l);
  const BnShape g = shape_of(x.view, l);
  DeviceBuffer coef(ctx, sizeof(float) * 4 * g.c);
  dispatch_float_no_f64(a.x.dtype, "batch_norm_bwd", [&](auto t) {
    using T = decltype(t);
    const T* xp = x.view.ptr<T>();
    const T* dyp = dy.view.ptr<T>();
    T* dxp = a.dx.defined ? dx.view.ptr<T>() : nullptr;
    T* dzp = a.dz.defined ? dz.view.ptr<T>() : nullptr;
    const uint8_t* mask = a.relu_mask.defined ? a.relu_mask.ptr<const uint8_t>() : nullptr;
    const int v = vec_width<T>(g, {xp, dyp, a.dx.defined ? static_cast<const void*>(dxp) : xp,
                                   dzp ? static_cast<const void*>(dzp) : xp});
    BnSums s = bn_sums<T, true>(ctx, xp, dyp, a.save_mean, g, v, mask, mask ? dzp : nullptr);
    const DeviceBuffer group = bn_group_sums<T, true>(ctx, a.training ? a.sync : nullptr, xp, s, g);
    bn_bwd_finish(ctx, a, s, group, g, coef.as<float>());
    if (!a.dx.defined) return;
    // The sums pass wrote the masked dy to dz: the apply pass reads it instead.
    const bool via_dz = mask && dzp;
    BnFusion<T> f;
    f.mask = via_dz ? nullptr : const_cast<uint8_t*>(mask);
    const T* gp = via_dz ? dzp : dyp;
    bn_apply<T, true>(ctx, xp, gp, dxp, coef.as<float>(), g, v, f);
  });
  if (a.dx.defined) dx.finish(ctx);
  if (a.dz.defined) dz.finish(ctx);
}

}  // namespace strata::backends::cuda
