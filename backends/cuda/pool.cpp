// max_pool2d and avg_pool2d on cuDNN's pooling API (floor mode, as the shape rules;
// NaN propagates, as in PyTorch and the reference).
// Max pooling's backward sends each window's gradient to its maximum: on dense
// channels-last tensors strata's kernels (pool_kernels.cu: the first maximum, as the
// reference), else cuDNN, with `deterministic` on CUDNN_POOLING_MAX_DETERMINISTIC, where
// ties inside a window (which random data does not produce) may resolve differently from
// the reference's "first maximum". Average pooling's backward needs no x or y: cuDNN is handed
// dy/dx in their place, as it reads neither for averaging.
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/pool_kernels.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

struct PoolPlan : Plan {
  TensorDesc x, y;
  PoolDesc pool;
};

PoolPlan& pool_plan(Context& ctx, cudnnPoolingMode_t mode, const TensorView& x, const TensorView& y,
                    const Pool2dParams& pp, const char* op) {
  PlanKey key;
  key.add(4001).add(static_cast<int64_t>(mode)).add(static_cast<int64_t>(x.dtype)).add(x.sizes).add(x.strides);
  key.add(y.sizes).add(y.strides).add(pp.kernel_h).add(pp.kernel_w).add(pp.stride_h).add(pp.stride_w);
  key.add(pp.pad_h).add(pp.pad_w);
  return ctx.plan<PoolPlan>(key, [&] {
    auto p = std::make_unique<PoolPlan>();
    p->x.set(x, op);
    p->y.set(y, op);
    STRATA_CUDNN_CHECK(cudnnSetPooling2dDescriptor(p->pool.get(), mode, CUDNN_PROPAGATE_NAN, pp.kernel_h,
                                                   pp.kernel_w, pp.pad_h, pp.pad_w, pp.stride_h, pp.stride_w));
    return p;
  });
}

cudnnPoolingMode_t avg_mode(const Pool2dParams& p) {
  return p.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
}

void pool_fwd_in(Context& ctx, cudnnPoolingMode_t mode, const TensorView& x_in, const TensorView& y_in,
                 const Pool2dParams& pp, const char* op) {
  const Layout l = layout_of(x_in);
  Staged x = stage_in(ctx, x_in, l);
  Staged y = stage_out(ctx, y_in, l);
  PoolPlan& p = pool_plan(ctx, mode, x.view, y.view, pp, op);
  if (observing()) {
    if (x.temp || y.temp) observe_library(LibraryCall::Kind::staged);
    observe_library({.kind = LibraryCall::Kind::pooling, .mode = static_cast<int64_t>(mode)});
  }
  const Scalars s(x_in.dtype);
  STRATA_CUDNN_CHECK(cudnnPoolingForward(ctx.cudnn, p.pool.get(), s.one(), p.x.get(), x.view.data, s.zero(),
                                         p.y.get(), y.view.data));
  y.finish(ctx);
}

// Average pooling passes no x and y: cuDNN reads neither for it, so dx and dy stand in.
void pool_bwd_in(Context& ctx, cudnnPoolingMode_t mode, const TensorView* x_in, const TensorView* y_in,
                 const TensorView& dy_in, const TensorView& dx_in, const Pool2dParams& pp, const char* op) {
  const Layout l = layout_of(dx_in);
  Staged dy = stage_in(ctx, dy_in, l);
  Staged dx = stage_out(ctx, dx_in, l);
  Staged x, y;
  if (x_in) x = stage_in(ctx, *x_in, l), y = stage_in(ctx, *y_in, l);
  const TensorView& xv = x_in ? x.view : dx.view;
  const TensorView& yv = y_in ? y.view : dy.view;
  PoolPlan& p = pool_plan(ctx, mode, xv, yv, pp, op);
  if (observing()) {
    if (dy.temp || dx.temp || x.temp || y.temp) observe_library(LibraryCall::Kind::staged);
    observe_library({.kind = LibraryCall::Kind::pooling_bwd, .mode = static_cast<int64_t>(mode)});
  }
  const Scalars s(dx_in.dtype);
  STRATA_CUDNN_CHECK(cudnnPoolingBackward(ctx.cudnn, p.pool.get(), s.one(), p.y.get(), yv.data, p.y.get(),
                                          dy.view.data, p.x.get(), xv.data, s.zero(), p.x.get(), dx.view.data));
  dx.finish(ctx);
}

cudnnPoolingMode_t max_mode(const Settings& s) {
  return s.deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX;
}

}  // namespace
}  // namespace cuda

using namespace cuda;

// Activations past cuDNN's 32-bit limits run as several calls along the batch (cudnn_util.h).
void CudaBackend::max_pool2d_fwd(const MaxPool2dFwdArgs& a) {
  observe_call(OpId::max_pool2d_fwd, a);
  if (a.y.numel() == 0) return;
  using A = MaxPool2dFwdArgs;
  along_batch("max_pool2d_fwd", a, {{&A::x, "x"}, {&A::y, "y"}}, [&](A& b, int64_t n0) {
    if (n0 > 0) observe_library(LibraryCall::Kind::split);
    pool_fwd_in(*ctx_, max_mode(settings_), b.x, b.y, b.p, "max_pool2d_fwd");
  });
}

void CudaBackend::max_pool2d_bwd(const MaxPool2dBwdArgs& a) {
  observe_call(OpId::max_pool2d_bwd, a);
  if (a.dx.numel() == 0) return;
  if (max_pool2d_bwd_channels_last(*ctx_, a)) return observe_library(LibraryCall::Kind::own_kernel);
  using A = MaxPool2dBwdArgs;
  along_batch("max_pool2d_bwd", a, {{&A::x, "x"}, {&A::y, "y"}, {&A::dy, "dy"}, {&A::dx, "dx"}}, [&](A& b, int64_t n0) {
    if (n0 > 0) observe_library(LibraryCall::Kind::split);
    pool_bwd_in(*ctx_, max_mode(settings_), &b.x, &b.y, b.dy, b.dx, b.p, "max_pool2d_bwd");
  });
}

void CudaBackend::avg_pool2d_fwd(const AvgPool2dFwdArgs& a) {
  observe_call(OpId::avg_pool2d_fwd, a);
  if (a.y.numel() == 0) return;
  using A = AvgPool2dFwdArgs;
  along_batch("avg_pool2d_fwd", a, {{&A::x, "x"}, {&A::y, "y"}}, [&](A& b, int64_t n0) {
    if (n0 > 0) observe_library(LibraryCall::Kind::split);
    pool_fwd_in(*ctx_, avg_mode(b.p), b.x, b.y, b.p, "avg_pool2d_fwd");
  });
}

void CudaBackend::avg_pool2d_bwd(const AvgPool2dBwdArgs& a) {
  if (a.dx.numel() == 0) return;
  using A = AvgPool2dBwdArgs;
  along_batch("avg_pool2d_bwd", a, {{&A::dy, "dy"}, {&A::dx, "dx"}}, [&](A& b, int64_t) {
    pool_bwd_in(*ctx_, avg_mode(b.p), nullptr, nullptr, b.dy, b.dx, b.p, "avg_pool2d_bwd");
  });
}

}  // namespace strata::backends
