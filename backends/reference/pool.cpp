// Pooling over NCHW-ordered sizes with any strides. Padding never contributes to
// a max (it acts as -inf); for averages, count_include_pad picks the divisor as in
// PyTorch's avg_pool2d. The backward passes scatter into a double scratch buffer
// (windows may overlap), then write dx once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::off4;
using ref::visit_float;

namespace {

struct Dims {
  int64_t N, C, H, W, OH, OW;
};
Dims dims(const TensorView& in, const TensorView& out) {
  return {in.sizes[0], in.sizes[1], in.sizes[2], in.sizes[3], out.sizes[2], out.sizes[3]};
}

// The window of output (oh, ow) clipped to the input, and its avg-pool divisor.
struct Window {
  int64_t h0, h1, w0, w1;  // [h0, h1) x [w0, w1) inside the input
  int64_t divisor;
};
Window window(const Pool2dParams& p, const Dims& d, int64_t oh, int64_t ow) {
  int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  int64_t h1 = std::min(h0 + p.kernel_h, d.H + p.pad_h), w1 = std::min(w0 + p.kernel_w, d.W + p.pad_w);
  const int64_t padded_area = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, d.H);
  w1 = std::min(w1, d.W);
  const int64_t valid_area = (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, p.count_include_pad ? padded_area : valid_area};
}

// Whether v replaces m as the window's maximum: strictly larger, or the first NaN
// (NaN propagates, as in PyTorch).
template <class T>
bool beats(T v, T m) {
  return v > m || (std::isnan(v) && !std::isnan(m));
}

// The first maximum of a window in row-major order (only a strictly larger value or a
// first NaN moves it): its position (h = -1 for an empty window) and value (-inf then).
template <class T>
struct WindowMax {
  int64_t h = -1, w = -1;
  T value = -std::numeric_limits<T>::infinity();
};
template <class T>
WindowMax<T> first_max(const T* x, const TensorView& xv, int64_t n, int64_t c, const Window& win) {
  WindowMax<T> m;
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const T v = x[off4(xv, n, c, h, w)];
      if (m.h < 0 || beats(v, m.value)) m = {h, w, v};
    }
  return m;
}

// Writes a dense [N,C,H,W] double buffer into dx through its strides.
template <class T>
void store(const std::vector<double>& buf, const TensorView& dx, const Dims& d) {
  T* out = dx.ptr<T>();
  int64_t i = 0;
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t w = 0; w < d.W; ++w) out[off4(dx, n, c, h, w)] = static_cast<T>(buf[i++]);
}
inline int64_t dense(const Dims& d, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ((n * d.C + c) * d.H + h) * d.W + w;
}

// f(n, c, oh, ow, window) for every output position, in row-major order.
template <class F>
void for_each_window(const Pool2dParams& p, const Dims& d, F&& f) {
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t oh = 0; oh < d.OH; ++oh)
        for (int64_t ow = 0; ow < d.OW; ++ow) f(n, c, oh, ow, window(p, d, oh, ow));
}

// A backward pass as a scatter: f(n, c, oh, ow, window, buf) adds each window's
// contribution into a dense double buffer of dx's sizes, stored into dx at the end.
template <class T, class F>
void scatter_windows(const TensorView& dx, const Pool2dParams& p, const Dims& d, F&& f) {
  std::vector<double> buf(static_cast<size_t>(dx.numel()), 0.0);
  for_each_window(p, d, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window& win) {
    f(n, c, oh, ow, win, buf);
  });
  store<T>(buf, dx, d);
}

}  // namespace

void ReferenceBackend::max_pool2d_fwd(const MaxPool2dFwdArgs& a) {
  visit_float(a.x.dtype, "max_pool2d_fwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    for_each_window(a.p, dims(a.x, a.y), [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window& win) {
      y[off4(a.y, n, c, oh, ow)] = first_max(x, a.x, n, c, win).value;
    });
  });
}

void ReferenceBackend::max_pool2d_bwd(const MaxPool2dBwdArgs& a) {
  visit_float(a.x.dtype, "max_pool2d_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    const T* dy = a.dy.ptr<T>();
    const Dims d = dims(a.x, a.dy);
    scatter_windows<T>(a.dx, a.p, d, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window& win, auto& buf) {
      const WindowMax<T> m = first_max(x, a.x, n, c, win);
      if (m.h >= 0) buf[dense(d, n, c, m.h, m.w)] += static_cast<double>(dy[off4(a.dy, n, c, oh, ow)]);
    });
  });
}

void ReferenceBackend::avg_pool2d_fwd(const AvgPool2dFwdArgs& a) {
  visit_float(a.x.dtype, "avg_pool2d_fwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    for_each_window(a.p, dims(a.x, a.y), [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window& win) {
      double acc = 0.0;
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w) acc += static_cast<double>(x[off4(a.x, n, c, h, w)]);
      y[off4(a.y, n, c, oh, ow)] = static_cast<T>(win.divisor > 0 ? acc / static_cast<double>(win.divisor) : 0.0);
    });
  });
}

void ReferenceBackend::avg_pool2d_bwd(const AvgPool2dBwdArgs& a) {
  visit_float(a.dy.dtype, "avg_pool2d_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = a.dy.ptr<T>();
    const Dims d = dims(a.dx, a.dy);
    scatter_windows<T>(a.dx, a.p, d, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window& win, auto& buf) {
      if (win.divisor <= 0) return;
      const double g = static_cast<double>(dy[off4(a.dy, n, c, oh, ow)]) / static_cast<double>(win.divisor);
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w) buf[dense(d, n, c, h, w)] += g;
    });
  });
}

void ReferenceBackend::global_avg_pool_fwd(const GlobalAvgPoolFwdArgs& a) {
  visit_float(a.x.dtype, "global_avg_pool_fwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    const int64_t N = a.x.sizes[0], C = a.x.sizes[1], H = a.x.sizes[2], W = a.x.sizes[3];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0.0;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) acc += static_cast<double>(x[off4(a.x, n, c, h, w)]);
        y[ref::off2(a.y, n, c)] = static_cast<T>(acc / static_cast<double>(H * W));
      }
  });
}

void ReferenceBackend::global_avg_pool_bwd(const GlobalAvgPoolBwdArgs& a) {
  visit_float(a.dy.dtype, "global_avg_pool_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = a.dy.ptr<T>();
    T* dx = a.dx.ptr<T>();
    const int64_t N = a.dx.sizes[0], C = a.dx.sizes[1], H = a.dx.sizes[2], W = a.dx.sizes[3];
    const double inv = 1.0 / static_cast<double>(H * W);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        const T g = static_cast<T>(static_cast<double>(dy[ref::off2(a.dy, n, c)]) * inv);
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) dx[off4(a.dx, n, c, h, w)] = g;
      }
  });
}

}  // namespace strata::backends
