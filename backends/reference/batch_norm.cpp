// batch_norm over x [N,C,H,W] (any strides) or [N,C], per channel C. Statistics
// are computed in double with two passes (mean, then squared deviations).
#include <cmath>

#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"
#include "strata/ops/table/relu_mask.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::off2;
using ref::off4;
using ref::visit_float;

namespace {

// x viewed as [N,C,HW]: rank 2 is [N,C] with HW = 1.
struct BnShape {
  int64_t N, C, H, W;
  int64_t per_channel() const { return N * H * W; }
};
BnShape bn_shape(const TensorView& x) {
  if (x.dim() == 2) return {x.sizes[0], x.sizes[1], 1, 1};
  return {x.sizes[0], x.sizes[1], x.sizes[2], x.sizes[3]};
}
inline int64_t bn_off(const TensorView& v, int64_t n, int64_t c, int64_t h, int64_t w) {
  return v.dim() == 2 ? off2(v, n, c) : off4(v, n, c, h, w);
}

// Element c of a rank-1 [C] view, or `fallback` when the view is absent.
template <class T>
double param(const TensorView& v, int64_t c, double fallback) {
  return v.defined ? static_cast<double>(v.ptr<T>()[c * v.strides[0]]) : fallback;
}
template <class T>
void set_param(const TensorView& v, int64_t c, double value) {
  if (v.defined) v.ptr<T>()[c * v.strides[0]] = static_cast<T>(value);
}

// Calls fn(off_a, off_b) for every element of channel c of two same-shaped views.
template <class Fn>
void for_channel(const BnShape& s, int64_t c, const TensorView& a, const TensorView& b, Fn&& fn) {
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t w = 0; w < s.W; ++w) fn(bn_off(a, n, c, h, w), bn_off(b, n, c, h, w));
}

}  // namespace

void ReferenceBackend::batch_norm_fwd(const BatchNormFwdArgs& a) {
  visit_float(a.x.dtype, "batch_norm_fwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    const BnShape s = bn_shape(a.x);
    const int64_t M = s.per_channel();
    if (a.training)
      STRATA_CHECK(M > 1, "batch_norm_fwd: training needs more than one value per channel, got x ", a.x.sizes.str());
    else
      STRATA_CHECK(a.running_mean.defined && a.running_var.defined,
                   "batch_norm_fwd: eval mode needs running_mean and running_var");
    for (int64_t c = 0; c < s.C; ++c) {
      double mean, var;
      if (a.training) {
        double sum = 0.0;
        for_channel(s, c, a.x, a.x, [&](int64_t ox, int64_t) { sum += static_cast<double>(x[ox]); });
        mean = sum / static_cast<double>(M);
        double sq = 0.0;
        for_channel(s, c, a.x, a.x, [&](int64_t ox, int64_t) {
          const double d = static_cast<double>(x[ox]) - mean;
          sq += d * d;
        });
        var = sq / static_cast<double>(M);  // biased: used to normalise
        const double unbiased = sq / static_cast<double>(M - 1);
        const double m = a.momentum;
        if (a.running_mean.defined)
          set_param<T>(a.running_mean, c, (1.0 - m) * param<T>(a.running_mean, c, 0.0) + m * mean);
        if (a.running_var.defined)
          set_param<T>(a.running_var, c, (1.0 - m) * param<T>(a.running_var, c, 1.0) + m * unbiased);
      } else {
        mean = param<T>(a.running_mean, c, 0.0);
        var = param<T>(a.running_var, c, 1.0);
      }
      const double invstd = 1.0 / std::sqrt(var + a.eps);
      set_param<T>(a.save_mean, c, mean);
      set_param<T>(a.save_invstd, c, invstd);
      const double g = param<T>(a.gamma, c, 1.0), b = param<T>(a.beta, c, 0.0);
      for_channel(s, c, a.x, a.y, [&](int64_t ox, int64_t oy) {
        y[oy] = static_cast<T>((static_cast<double>(x[ox]) - mean) * invstd * g + b);
      });
    }
    ref::residual_relu_epilogue<T>(a);  // fusion
    write_relu_mask<T>(a);
  });
}

namespace {
// With xhat = (x - mean) * invstd and M values per channel:
//   dbeta = sum dy, dgamma = sum dy * xhat,
//   training: dx = gamma * invstd / M * (M * dy - dbeta - xhat * dgamma)
//   eval:     dx = gamma * invstd * dy (the statistics are constants).
template <class T>
void plain_batch_norm_bwd(const BatchNormBwdArgs& a) {
  const T* x = a.x.ptr<T>();
  const T* dy = a.dy.ptr<T>();
  const BnShape s = bn_shape(a.x);
  const double M = static_cast<double>(s.per_channel());
  for (int64_t c = 0; c < s.C; ++c) {
    const double mean = param<T>(a.save_mean, c, 0.0);
    const double invstd = param<T>(a.save_invstd, c, 1.0);
    const double g = param<T>(a.gamma, c, 1.0);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for_channel(s, c, a.x, a.dy, [&](int64_t ox, int64_t ody) {
      const double d = static_cast<double>(dy[ody]);
      sum_dy += d;
      sum_dy_xhat += d * (static_cast<double>(x[ox]) - mean) * invstd;
    });
    set_param<T>(a.dgamma, c, sum_dy_xhat);
    set_param<T>(a.dbeta, c, sum_dy);
    if (!a.dx.defined) continue;
    T* dx = a.dx.ptr<T>();
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t w = 0; w < s.W; ++w) {
          const double d = static_cast<double>(dy[bn_off(a.dy, n, c, h, w)]);
          double v;
          if (a.training) {
            const double xhat = (static_cast<double>(x[bn_off(a.x, n, c, h, w)]) - mean) * invstd;
            v = g * invstd / M * (M * d - sum_dy - xhat * sum_dy_xhat);
          } else {
            v = g * invstd * d;
          }
          dx[bn_off(a.dx, n, c, h, w)] = static_cast<T>(v);
        }
  }
}
}  // namespace

// A fused forward's backward masks dy first (relu_mask.h).
void ReferenceBackend::batch_norm_bwd(const BatchNormBwdArgs& fused) {
  visit_float(fused.x.dtype, "batch_norm_bwd", [&](auto tag) {
    using T = decltype(tag);
    masked_batch_norm_bwd<T>(fused, [&](const BatchNormBwdArgs& a) { plain_batch_norm_bwd<T>(a); });
  });
}

}  // namespace strata::backends
