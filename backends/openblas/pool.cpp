// Pooling as plain loops over contiguous NCHW planes (other layouts are packed).
// Max pooling's gradient goes to the first maximum of each window in row-major
// order (strict >; a NaN wins, as in PyTorch), as op_args.h specifies; windows are clipped to the input, so
// padding never wins a max and counts in an average only with count_include_pad.
#include <algorithm>
#include <cmath>
#include <limits>

#include "strata/backends/cpu/reduce.h"
#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using loops::ContiguousIn;
using loops::ContiguousOut;
using loops::visit_float;

namespace {

// A window of the input plane, clipped to it: rows [h0, h1), columns [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
};

struct PoolGeom {
  int64_t planes, h, w, ho, wo;
  Pool2dParams p;
  // The window of output (oh, ow).
  Window window(int64_t oh, int64_t ow) const {
    const int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
    return {std::max<int64_t>(h0, 0), std::min(h0 + p.kernel_h, h), std::max<int64_t>(w0, 0),
            std::min(w0 + p.kernel_w, w)};
  }
  double divisor(const Window& win) const {
    return p.count_include_pad ? static_cast<double>(p.kernel_h * p.kernel_w)
                               : static_cast<double>((win.h1 - win.h0) * (win.w1 - win.w0));
  }
};

PoolGeom geometry(const TensorView& x, const TensorView& y, const Pool2dParams& p) {
  return {x.sizes[0] * x.sizes[1], x.sizes[2], x.sizes[3], y.sizes[2], y.sizes[3], p};
}

// f(plane, oh, ow, window) for every output of every plane, in order.
template <class F>
void for_each_window(const PoolGeom& g, F&& f) {
  for (int64_t pl = 0; pl < g.planes; ++pl)
    for (int64_t oh = 0; oh < g.ho; ++oh)
      for (int64_t ow = 0; ow < g.wo; ++ow) f(pl, oh, ow, g.window(oh, ow));
}

// A forward pass: each output is f(x_plane, window).
template <class T, class F>
void map_windows(const TensorView& xv, const TensorView& yv, const PoolGeom& g, F&& f) {
  ContiguousIn<T> xin(xv);
  ContiguousOut<T> yout(yv);
  for_each_window(g, [&](int64_t pl, int64_t oh, int64_t ow, const Window& win) {
    yout.get()[(pl * g.ho + oh) * g.wo + ow] = f(xin.get() + pl * g.h * g.w, win);
  });
  yout.finish();
}

// A backward pass as a scatter into dx, zeroed first (windows may overlap):
// f(dx_plane, plane, oh, ow, window) adds the window's contribution.
template <class T, class F>
void scatter_windows(const TensorView& dxv, const PoolGeom& g, F&& f) {
  ContiguousOut<T> dxout(dxv);
  std::fill(dxout.get(), dxout.get() + dxv.numel(), T(0));
  for_each_window(g, [&](int64_t pl, int64_t oh, int64_t ow, const Window& win) {
    f(dxout.get() + pl * g.h * g.w, pl, oh, ow, win);
  });
  dxout.finish();
}

// Offset within the plane of the window's first maximum (-1 for an empty window).
template <class T>
int64_t argmax_window(const T* plane, const PoolGeom& g, const Window& win) {
  int64_t best = -1;
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) {
      const T v = plane[ih * g.w + iw];
      if (best < 0 || loops::beats(v, m)) {
        m = v;
        best = ih * g.w + iw;
      }
    }
  return best;
}

template <class T>
void max_fwd(const MaxPool2dFwdArgs& a) {
  const PoolGeom g = geometry(a.x, a.y, a.p);
  map_windows<T>(a.x, a.y, g, [&](const T* x, const Window& win) {
    const int64_t at = argmax_window(x, g, win);
    return at >= 0 ? x[at] : -std::numeric_limits<T>::infinity();
  });
}

template <class T>
void max_bwd(const MaxPool2dBwdArgs& a) {
  const PoolGeom g = geometry(a.x, a.dy, a.p);
  ContiguousIn<T> xin(a.x), dyin(a.dy);
  scatter_windows<T>(a.dx, g, [&](T* dx, int64_t pl, int64_t oh, int64_t ow, const Window& win) {
    const int64_t at = argmax_window(xin.get() + pl * g.h * g.w, g, win);
    if (at >= 0) dx[at] += dyin.get()[(pl * g.ho + oh) * g.wo + ow];
  });
}

template <class T>
void avg_fwd(const AvgPool2dFwdArgs& a) {
  const PoolGeom g = geometry(a.x, a.y, a.p);
  map_windows<T>(a.x, a.y, g, [&](const T* x, const Window& win) {
    double s = 0;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) s += static_cast<double>(x[ih * g.w + iw]);
    return static_cast<T>(s / g.divisor(win));
  });
}

template <class T>
void avg_bwd(const AvgPool2dBwdArgs& a) {
  const PoolGeom g = geometry(a.dx, a.dy, a.p);
  ContiguousIn<T> dyin(a.dy);
  scatter_windows<T>(a.dx, g, [&](T* dx, int64_t pl, int64_t oh, int64_t ow, const Window& win) {
    const T v = static_cast<T>(static_cast<double>(dyin.get()[(pl * g.ho + oh) * g.wo + ow]) / g.divisor(win));
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) dx[ih * g.w + iw] += v;
  });
}

// x [N,C,H,W] (any strides) -> y [N,C]: plane means in double.
template <class T>
void gap_fwd(const GlobalAvgPoolFwdArgs& a) {
  const TensorView& v = a.x;
  const int64_t hh = v.sizes[2], ww = v.sizes[3];
  const bool planes = v.strides[3] == 1 && v.strides[2] == ww;
  const T* x = v.ptr<const T>();
  T* y = a.y.ptr<T>();
  for (int64_t n = 0; n < v.sizes[0]; ++n)
    for (int64_t c = 0; c < v.sizes[1]; ++c) {
      const T* base = x + n * v.strides[0] + c * v.strides[1];
      double s = 0;
      if (planes) {
        s = loops::sum_contiguous(base, hh * ww);
      } else {
        for (int64_t h = 0; h < hh; ++h)
          for (int64_t w = 0; w < ww; ++w) s += static_cast<double>(base[h * v.strides[2] + w * v.strides[3]]);
      }
      y[n * a.y.strides[0] + c * a.y.strides[1]] = static_cast<T>(s / static_cast<double>(hh * ww));
    }
}

template <class T>
void gap_bwd(const GlobalAvgPoolBwdArgs& a) {
  const TensorView& v = a.dx;
  const int64_t hh = v.sizes[2], ww = v.sizes[3];
  const T* dy = a.dy.ptr<const T>();
  T* dx = v.ptr<T>();
  const double inv = 1.0 / static_cast<double>(hh * ww);
  for (int64_t n = 0; n < v.sizes[0]; ++n)
    for (int64_t c = 0; c < v.sizes[1]; ++c) {
      const T g = static_cast<T>(static_cast<double>(dy[n * a.dy.strides[0] + c * a.dy.strides[1]]) * inv);
      T* base = dx + n * v.strides[0] + c * v.strides[1];
      for (int64_t h = 0; h < hh; ++h)
        for (int64_t w = 0; w < ww; ++w) base[h * v.strides[2] + w * v.strides[3]] = g;
    }
}

}  // namespace

void OpenBlasBackend::max_pool2d_fwd(const MaxPool2dFwdArgs& a) {
  visit_float(kName, "max_pool2d_fwd", a.x.dtype, [&](auto t) { max_fwd<decltype(t)>(a); });
}
void OpenBlasBackend::max_pool2d_bwd(const MaxPool2dBwdArgs& a) {
  visit_float(kName, "max_pool2d_bwd", a.x.dtype, [&](auto t) { max_bwd<decltype(t)>(a); });
}
void OpenBlasBackend::avg_pool2d_fwd(const AvgPool2dFwdArgs& a) {
  visit_float(kName, "avg_pool2d_fwd", a.x.dtype, [&](auto t) { avg_fwd<decltype(t)>(a); });
}
void OpenBlasBackend::avg_pool2d_bwd(const AvgPool2dBwdArgs& a) {
  visit_float(kName, "avg_pool2d_bwd", a.dy.dtype, [&](auto t) { avg_bwd<decltype(t)>(a); });
}
void OpenBlasBackend::global_avg_pool_fwd(const GlobalAvgPoolFwdArgs& a) {
  visit_float(kName, "global_avg_pool_fwd", a.x.dtype, [&](auto t) { gap_fwd<decltype(t)>(a); });
}
void OpenBlasBackend::global_avg_pool_bwd(const GlobalAvgPoolBwdArgs& a) {
  visit_float(kName, "global_avg_pool_bwd", a.dy.dtype, [&](auto t) { gap_bwd<decltype(t)>(a); });
}

}  // namespace strata::backends
