// Pooling over x as [B, H, W, D] (NHWC: B = N, D = C; NCHW: B = N*C, D = 1).
// Average pooling as reductions over image patches, as TensorFlow's Eigen pooling did:
// extract_image_patches gives [B, Ho*Wo, kh, kw, D], and a sum over the window
// dimensions gives y in the same layout; its backward pass is the adjoint, for each
// window offset (r, s) a strided slice of a zero-padded dx accumulating dy, then the
// padding cropped. Max pooling is a loop over each window's valid inputs instead: the
// same expressions with a first-maximum reducer and an arg-max mask per window offset
// took 10x (forward) and 50x (backward) the time of such a loop
// (docs/results/cpu_eigen.md).
#include <algorithm>
#include <cmath>
#include <limits>

#include "strata/backends/eigen/context.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using eigen::Dims;
using eigen::Index;
using eigen::Layout;
using eigen::Map;
using eigen::Output4;
using eigen::Packed4;
using eigen::visit_float;

namespace {

struct PoolGeom {
  Index n, c, h, w, ho, wo, b, d;
  Pool2dParams p;
  Layout l;
  Dims<4> in() const { return Dims<4>(b, h, w, d); }    // x, dx as [B, H, W, D]
  Dims<4> out() const { return Dims<4>(b, ho, wo, d); }  // y, dy as [B, Ho, Wo, D]
  Dims<3> out3() const { return Dims<3>(b, ho * wo, d); }
};

PoolGeom geometry(const TensorView& x, const TensorView& y, const Pool2dParams& p) {
  PoolGeom g{x.sizes[0], x.sizes[1], x.sizes[2], x.sizes[3], y.sizes[2], y.sizes[3], 0, 0, p, eigen::layout_of(x)};
  g.b = g.l == Layout::nhwc ? g.n : g.n * g.c;
  g.d = g.l == Layout::nhwc ? g.c : 1;
  return g;
}

// The image patches of x [B, H, W, D] as [B, Ho*Wo, kh*kw, D], padding filled with v.
template <class X>
auto patches(const X& x, const PoolGeom& g, typename X::Scalar v) {
  const Pool2dParams& p = g.p;
  return x.extract_image_patches(p.kernel_w, p.kernel_h, p.stride_w, p.stride_h, 1, 1, 1, 1, p.pad_w, p.pad_w, p.pad_h,
                                 p.pad_h, v)
      .reshape(Dims<4>{g.b, g.ho * g.wo, Index(p.kernel_h) * p.kernel_w, g.d});
}

// Whether v replaces m as a window's maximum: a larger value, or the first NaN. Ties
// keep the earlier value (its bits: -0 before +0, as the reference has them).
template <class T>
bool first_max(T m, T v) {
  return v > m || (v != v && m == m);
}

// f(out, first, rows, cols) for every output position of plane b: out its index in the
// plane's [Ho, Wo], first the input index of its window's first valid value in the
// plane's [H, W], rows x cols the window clipped to the input.
template <class F>
void for_windows(const PoolGeom& g, F&& f) {
  const Pool2dParams& p = g.p;
  for (Index oh = 0; oh < g.ho; ++oh) {
    const Index h0 = oh * p.stride_h - p.pad_h;
    const Index ha = std::max<Index>(h0, 0), hb = std::min<Index>(h0 + p.kernel_h, g.h);
    for (Index ow = 0; ow < g.wo; ++ow) {
      const Index w0 = ow * p.stride_w - p.pad_w;
      const Index wa = std::max<Index>(w0, 0), wb = std::min<Index>(w0 + p.kernel_w, g.w);
      f(oh * g.wo + ow, ha * g.w + wa, hb - ha, wb - wa);
    }
  }
}

// f(b0, b1) over the planes [0, B), split in contiguous ranges over the pool's threads
// when the output has at least 32768 values (below that the hand-off costs more than
// the work, docs/threads.md).
template <class F>
void over_planes(eigen::Context& ctx, const PoolGeom& g, F&& f) {
  const Index outputs = g.b * g.ho * g.wo * g.d;
  const int slots = ctx.threads > 1 && g.b >= ctx.threads && outputs >= 32768 ? ctx.threads : 1;
  eigen::for_slots(ctx, slots, [&](int i) { f(g.b * i / slots, g.b * (i + 1) / slots); });
}

// The window of output p = oh * Wo + ow clipped to the input, as the reference forms
// it: its divisor (padded or valid area).
struct Window {
  const PoolGeom* g;
  template <class T>
  T divisor(Index p) const {
    const Index oh = p / g->wo, ow = p % g->wo;
    Index h0 = oh * g->p.stride_h - g->p.pad_h, w0 = ow * g->p.stride_w - g->p.pad_w;
    Index h1 = std::min<Index>(h0 + g->p.kernel_h, g->h + g->p.pad_h);
    Index w1 = std::min<Index>(w0 + g->p.kernel_w, g->w + g->p.pad_w);
    const Index padded = (h1 - h0) * (w1 - w0);
    h0 = std::max<Index>(h0, 0), w0 = std::max<Index>(w0, 0), h1 = std::min(h1, g->h), w1 = std::min(w1, g->w);
    return static_cast<T>(g->p.count_include_pad ? padded : (h1 - h0) * (w1 - w0));
  }
};
template <class T>
struct DivisorGen {
  Window win;
  T operator()(const std::array<Index, 3>& c) const { return win.divisor<T>(c[1]); }
};

// dx = crop(sum over window offsets (r, s) of g(r, s) placed at the offset's strided
// slice of a zero-padded [B, H+2ph, W+2pw, D] buffer); g(r, s) is a [B, Ho, Wo, D]
// expression.
template <class T, class G>
void scatter_windows(eigen::Context& ctx, const PoolGeom& g, Output4<T>& dx, G&& contribution) {
  const Pool2dParams& p = g.p;
  const Index hp = g.h + 2 * p.pad_h, wp = g.w + 2 * p.pad_w;
  Map<T, 4> acc(ctx.slots[0][0].get<T>(g.b * hp * wp * g.d), g.b, hp, wp, g.d);
  auto& dev = ctx.device;
  acc.device(dev) = acc.constant(T(0));
  const Dims<4> extent{g.b, (g.ho - 1) * p.stride_h + 1, (g.wo - 1) * p.stride_w + 1, g.d};
  const Dims<4> stride{1, p.stride_h, p.stride_w, 1};
  for (Index r = 0; r < p.kernel_h; ++r)
    for (Index s = 0; s < p.kernel_w; ++s)
      acc.slice(Dims<4>{0, r, s, 0}, extent).stride(stride).device(dev) += contribution(r * p.kernel_w + s);
  dx.map().reshape(g.in()).device(dev) = acc.slice(Dims<4>{0, p.pad_h, p.pad_w, 0}, g.in());
  dx.finish(ctx);
}

}  // namespace

void EigenBackend::max_pool2d_fwd(const MaxPool2dFwdArgs& a) {
  visit_float("max_pool2d_fwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const PoolGeom g = geometry(a.x, a.y, a.p);
    if (a.y.numel() == 0) return;
    const Packed4<T> x(*ctx_, a.x, g.l, "max_pool2d_fwd", "x");
    Output4<T> y(a.y, g.l, "max_pool2d_fwd", "y");
    const Index dd = g.d, in_plane = g.h * g.w * dd, out_plane = g.ho * g.wo * dd, row = g.w * dd;
    over_planes(*ctx_, g, [&](Index b0, Index b1) {
      for (Index b = b0; b < b1; ++b) {
        const T* xp = x.data() + b * in_plane;
        T* yp = y.data() + b * out_plane;
        for_windows(g, [&](Index out, Index first, Index rows, Index cols) {
          for (Index d = 0; d < dd; ++d) {
            // Padding is -inf: it never wins; a NaN does, as in PyTorch.
            T m = -std::numeric_limits<T>::infinity();
            const T* xr = xp + first * dd + d;
            for (Index r = 0; r < rows; ++r, xr += row)
              for (Index c = 0; c < cols; ++c)
                if (first_max(m, xr[c * dd])) m = xr[c * dd];
            yp[out * dd + d] = m;
          }
        });
      }
    });
    y.finish(*ctx_);
  });
}

// The gradient goes to the first maximum of each window in row-major order, or its
// first NaN, or, when the maximum is -inf (all of the window's inputs are), its first
// valid input.
void EigenBackend::max_pool2d_bwd(const MaxPool2dBwdArgs& a) {
  visit_float("max_pool2d_bwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const PoolGeom g = geometry(a.x, a.dy, a.p);
    const char* op = "max_pool2d_bwd";
    Output4<T> dx(a.dx, g.l, op, "dx");
    if (a.dy.numel() == 0) {
      if (a.dx.numel() > 0) dx.map().device(ctx_->device) = dx.map().constant(T(0));
      dx.finish(*ctx_);
      return;
    }
    const Packed4<T> x(*ctx_, a.x, g.l, op, "x"), dy(*ctx_, a.dy, g.l, op, "dy");
    const Index dd = g.d, in_plane = g.h * g.w * dd, out_plane = g.ho * g.wo * dd, row = g.w * dd;
    over_planes(*ctx_, g, [&](Index b0, Index b1) {
      std::fill(dx.data() + b0 * in_plane, dx.data() + b1 * in_plane, T(0));
      for (Index b = b0; b < b1; ++b) {
        const T* xp = x.data() + b * in_plane;
        const T* dyp = dy.data() + b * out_plane;
        T* dxp = dx.data() + b * in_plane;
        for_windows(g, [&](Index out, Index first, Index rows, Index cols) {
          if (rows <= 0 || cols <= 0) return;  // all padding: no input to credit
          for (Index d = 0; d < dd; ++d) {
            const T* xr = xp + first * dd + d;
            Index best = 0;
            T m = xr[0];
            for (Index r = 0; r < rows; ++r, xr += row)
              for (Index c = 0; c < cols; ++c)
                if (first_max(m, xr[c * dd])) m = xr[c * dd], best = r * row + c * dd;
            dxp[first * dd + d + best] += dyp[out * dd + d];
          }
        });
      }
    });
    dx.finish(*ctx_);
  });
}

void EigenBackend::avg_pool2d_fwd(const AvgPool2dFwdArgs& a) {
  visit_float("avg_pool2d_fwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const PoolGeom g = geometry(a.x, a.y, a.p);
    if (a.y.numel() == 0) return;
    const Packed4<T> x(*ctx_, a.x, g.l, "avg_pool2d_fwd", "x");
    Output4<T> y(a.y, g.l, "avg_pool2d_fwd", "y");
    Map<T, 3> ym(y.data(), g.out3());
    ym.device(ctx_->device) = patches(x.map().reshape(g.in()), g, T(0)).sum(Eigen::array<Index, 1>{2}) /
                              ym.generate(DivisorGen<T>{Window{&g}});
    y.finish(*ctx_);
  });
}

void EigenBackend::avg_pool2d_bwd(const AvgPool2dBwdArgs& a) {
  visit_float("avg_pool2d_bwd", a.dy.dtype, [&](auto t) {
    using T = decltype(t);
    const PoolGeom g = geometry(a.dx, a.dy, a.p);
    Output4<T> dx(a.dx, g.l, "avg_pool2d_bwd", "dx");
    if (a.dy.numel() == 0) {
      if (a.dx.numel() > 0) dx.map().device(ctx_->device) = dx.map().constant(T(0));
      dx.finish(*ctx_);
      return;
    }
    const Packed4<T> dy(*ctx_, a.dy, g.l, "avg_pool2d_bwd", "dy");
    Eigen::Tensor<T, 3, Eigen::RowMajor, Index> share(g.out3());
    share.device(ctx_->device) = dy.map().reshape(g.out3()) / share.generate(DivisorGen<T>{Window{&g}});
    const auto sharem = share.reshape(g.out());
    scatter_windows<T>(*ctx_, g, dx, [&](Index) { return sharem; });
  });
}

void EigenBackend::global_avg_pool_fwd(const GlobalAvgPoolFwdArgs& a) {
  visit_float("global_avg_pool_fwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const Index n = a.x.sizes[0], c = a.x.sizes[1], hw = a.x.sizes[2] * a.x.sizes[3];
    const Layout l = eigen::layout_of(a.x);
    const Packed4<T> x(*ctx_, a.x, l, "global_avg_pool_fwd", "x");
    eigen::PackedOut<T, 2> y(a.y, "global_avg_pool_fwd", "y");
    if (l == Layout::nhwc)
      y.map().device(ctx_->device) = x.map().reshape(Dims<3>{n, hw, c}).mean(Eigen::array<Index, 1>{1});
    else
      y.map().device(ctx_->device) = x.map().reshape(Dims<3>{n, c, hw}).mean(Eigen::array<Index, 1>{2});
    y.finish(*ctx_);
  });
}

void EigenBackend::global_avg_pool_bwd(const GlobalAvgPoolBwdArgs& a) {
  visit_float("global_avg_pool_bwd", a.dy.dtype, [&](auto t) {
    using T = decltype(t);
    const Index n = a.dx.sizes[0], c = a.dx.sizes[1], hw = a.dx.sizes[2] * a.dx.sizes[3];
    const Layout l = eigen::layout_of(a.dx);
    const eigen::PackedIn<T, 2> dy(*ctx_, a.dy, "global_avg_pool_bwd", "dy");
    Output4<T> dx(a.dx, l, "global_avg_pool_bwd", "dx");
    const T inv = static_cast<T>(1.0 / static_cast<double>(hw));
    if (l == Layout::nhwc)
      dx.map().reshape(Dims<3>{n, hw, c}).device(ctx_->device) =
          (dy.map() * inv).reshape(Dims<3>{n, 1, c}).broadcast(Dims<3>{1, hw, 1});
    else
      dx.map().reshape(Dims<3>{n, c, hw}).device(ctx_->device) =
          (dy.map() * inv).reshape(Dims<3>{n, c, 1}).broadcast(Dims<3>{1, 1, hw});
    dx.finish(*ctx_);
  });
}

}  // namespace strata::backends
