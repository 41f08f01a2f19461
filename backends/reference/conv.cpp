// conv2d as direct loops. Every access goes through the views' strides, so NCHW,
// NHWC and arbitrary views all work. Both backward passes are written as gathers
// (each output element sums its own contributions) so they accumulate in double.
#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::off4;
using ref::visit_float;

namespace {

// The input coordinate that output position `o` reads through kernel tap `r`, or -1 if
// that is padding (outside the input extent).
inline int64_t in_coord(int64_t o, int64_t r, int stride, int pad, int dilation, int64_t in_size) {
  const int64_t i = o * stride - pad + r * dilation;
  return i >= 0 && i < in_size ? i : -1;
}

// The output position whose kernel tap `r` reads input coordinate `i`, or -1 if
// none does (the inverse of in_coord, checked against the output extent).
inline int64_t out_coord(int64_t i, int64_t r, int stride, int pad, int dilation, int64_t out_size) {
  const int64_t t = i + pad - r * dilation;
  if (t < 0 || t % stride != 0) return -1;
  const int64_t o = t / stride;
  return o < out_size ? o : -1;
}

// A convolution's sizes, from its input side (x or dx), filter (w or dw) and output
// side (y or dy): batch N, channels C (Cg per group), input H x W, filters K (Kg per
// group) of R x S taps, output OH x OW.
struct ConvDims {
  int64_t N, C, H, W, K, R, S, OH, OW, Cg, Kg;
};
ConvDims conv_dims(const TensorView& x, const TensorView& w, const TensorView& y, int groups) {
  const int64_t C = x.sizes[1], K = w.sizes[0];
  return {x.sizes[0], C, x.sizes[2], x.sizes[3], K, w.sizes[2], w.sizes[3], y.sizes[2], y.sizes[3], C / groups,
          K / groups};
}

}  // namespace

void ReferenceBackend::conv2d_fwd(const Conv2dFwdArgs& a) {
  visit_float(a.x.dtype, "conv2d_fwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    const T* w = a.w.ptr<T>();
    const T* b = a.b.defined ? a.b.ptr<T>() : nullptr;
    T* y = a.y.ptr<T>();
    const Conv2dParams& p = a.p;
    const auto [N, C, H, W, K, R, S, OH, OW, Cg, Kg] = conv_dims(a.x, a.w, a.y, p.groups);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t c0 = (k / Kg) * Cg;
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double acc = b ? static_cast<double>(b[k * a.b.strides[0]]) : 0.0;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t r = 0; r < R; ++r) {
                const int64_t ih = in_coord(oh, r, p.stride_h, p.pad_h, p.dilation_h, H);
                if (ih < 0) continue;
                for (int64_t s = 0; s < S; ++s) {
                  const int64_t iw = in_coord(ow, s, p.stride_w, p.pad_w, p.dilation_w, W);
                  if (iw < 0) continue;
                  acc += static_cast<double>(x[off4(a.x, n, c0 + c, ih, iw)]) *
                         static_cast<double>(w[off4(a.w, k, c, r, s)]);
                }
              }
            y[off4(a.y, n, k, oh, ow)] = static_cast<T>(acc);
          }
      }
    ref::residual_relu_epilogue<T>(a);  // the inference epilogue, if any
  });
}

void ReferenceBackend::conv2d_bwd_data(const Conv2dBwdDataArgs& a) {
  visit_float(a.dy.dtype, "conv2d_bwd_data", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = a.dy.ptr<T>();
    const T* w = a.w.ptr<T>();
    T* dx = a.dx.ptr<T>();
    const Conv2dParams& p = a.p;
    const auto [N, C, H, W, K, R, S, OH, OW, Cg, Kg] = conv_dims(a.dx, a.w, a.dy, p.groups);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t g = c / Cg, cg = c % Cg;
        for (int64_t ih = 0; ih < H; ++ih)
          for (int64_t iw = 0; iw < W; ++iw) {
            double acc = 0.0;
            for (int64_t r = 0; r < R; ++r) {
              const int64_t oh = out_coord(ih, r, p.stride_h, p.pad_h, p.dilation_h, OH);
              if (oh < 0) continue;
              for (int64_t s = 0; s < S; ++s) {
                const int64_t ow = out_coord(iw, s, p.stride_w, p.pad_w, p.dilation_w, OW);
                if (ow < 0) continue;
                for (int64_t k = g * Kg; k < (g + 1) * Kg; ++k)
                  acc += static_cast<double>(dy[off4(a.dy, n, k, oh, ow)]) *
                         static_cast<double>(w[off4(a.w, k, cg, r, s)]);
              }
            }
            dx[off4(a.dx, n, c, ih, iw)] = static_cast<T>(acc);
          }
      }
  });
}

void ReferenceBackend::conv2d_bwd_weight(const Conv2dBwdWeightArgs& a) {
  visit_float(a.x.dtype, "conv2d_bwd_weight", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    const T* dy = a.dy.ptr<T>();
    T* dw = a.dw.ptr<T>();
    const Conv2dParams& p = a.p;
    const auto [N, C, H, W, K, R, S, OH, OW, Cg, Kg] = conv_dims(a.x, a.dw, a.dy, p.groups);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t c0 = (k / Kg) * Cg;
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t s = 0; s < S; ++s) {
            double acc = 0.0;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t oh = 0; oh < OH; ++oh) {
                const int64_t ih = in_coord(oh, r, p.stride_h, p.pad_h, p.dilation_h, H);
                if (ih < 0) continue;
                for (int64_t ow = 0; ow < OW; ++ow) {
                  const int64_t iw = in_coord(ow, s, p.stride_w, p.pad_w, p.dilation_w, W);
                  if (iw < 0) continue;
                  acc += static_cast<double>(dy[off4(a.dy, n, k, oh, ow)]) *
                         static_cast<double>(x[off4(a.x, n, c0 + c, ih, iw)]);
                }
              }
            dw[off4(a.dw, k, c, r, s)] = static_cast<T>(acc);
          }
    }
  });
}

void ReferenceBackend::conv2d_bwd_bias(const Conv2dBwdBiasArgs& a) {
  visit_float(a.dy.dtype, "conv2d_bwd_bias", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = a.dy.ptr<T>();
    T* db = a.db.ptr<T>();
    const int64_t N = a.dy.sizes[0], K = a.dy.sizes[1], OH = a.dy.sizes[2], OW = a.dy.sizes[3];
    for (int64_t k = 0; k < K; ++k) {
      double acc = 0.0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) acc += static_cast<double>(dy[off4(a.dy, n, k, oh, ow)]);
      db[k * a.db.strides[0]] = static_cast<T>(acc);
    }
  });
}

}  // namespace strata::backends
