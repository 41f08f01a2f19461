// batch_norm over x [N,C,H,W] (any strides) or [N,C], per channel C. Statistics
// are computed in double with two passes (mean, then squared deviations); synchronised
// ones (op_args.h) from the group's sums of x and x^2, in double.
#include <algorithm>
#include <cmath>
#include <vector>

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
      STRATA_CHECK(M > 1 || a.sync, "batch_norm_fwd: training needs more than one value per channel, got x ",
                   a.x.sizes.str());
    else
      STRATA_CHECK(a.running_mean.defined && a.running_var.defined,
                   "batch_norm_fwd: eval mode needs running_mean and running_var");
    // Synchronised: the group's sum x, sum x^2 and row count (op_args.h).
    std::vector<double> group;
    if (a.sync) {
      group.assign(static_cast<size_t>(2 * s.C + 1), 0.0);
      for (int64_t c = 0; c < s.C; ++c)
        for_channel(s, c, a.x, a.x, [&](int64_t ox, int64_t) {
          const double v = static_cast<double>(x[ox]);
          group[c] += v;
          group[s.C + c] += v * v;
        });
      group[2 * s.C] = static_cast<double>(M);
      a.sync->all_reduce_sum(group.data(), group.size(), DType::f64);
    }
    for (int64_t c = 0; c < s.C; ++c) {
      double mean, var;
      if (a.training) {
        double unbiased;
        if (a.sync) {
          const double n = group[2 * s.C];
          mean = group[c] / n;
          var = std::max(group[s.C + c] / n - mean * mean, 0.0);
          unbiased = var * n / (n - 1.0);
        } else {
          double sum = 0.0;
          for_channel(s, c, a.x, a.x, [&](int64_t ox, int64_t) { sum += static_cast<double>(x[ox]); });
          mean = sum / static_cast<double>(M);
          double sq = 0.0;
          for_channel(s, c, a.x, a.x, [&](int64_t ox, int64_t) {
            const double d = static_cast<double>(x[ox]) - mean;
            sq += d * d;
          });
          var = sq / static_cast<double>(M);  // biased: used to normalise
          unbiased = sq / static_cast<double>(M - 1);
        }
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
// Synchronised (op_args.h): M, sum dy and sum dy * xhat are the group's in dx, while
// dgamma and dbeta stay this replica's.
template <class T>
void plain_batch_norm_bwd(const BatchNormBwdArgs& a) {
  const T* x = a.x.ptr<T>();
  const T* dy = a.dy.ptr<T>();
  const BnShape s = bn_shape(a.x);
  double M = static_cast<double>(s.per_channel());
  std::vector<double> sums(static_cast<size_t>(2 * s.C + 1));  // sum dy, sum dy * (x - mean), M
  for (int64_t c = 0; c < s.C; ++c) {
    const double mean = param<T>(a.save_mean, c, 0.0);
    const double invstd = param<T>(a.save_invstd, c, 1.0);
    double sum_dy = 0.0, sum_dy_xhat = 0.0, sum_dy_xmu = 0.0;
    for_channel(s, c, a.x, a.dy, [&](int64_t ox, int64_t ody) {
      const double d = static_cast<double>(dy[ody]);
      sum_dy += d;
      sum_dy_xhat += d * (static_cast<double>(x[ox]) - mean) * invstd;
      sum_dy_xmu += d * (static_cast<double>(x[ox]) - mean);
    });
    set_param<T>(a.dgamma, c, sum_dy_xhat);
    set_param<T>(a.dbeta, c, sum_dy);
    sums[c] = sum_dy;
    sums[s.C + c] = a.sync ? sum_dy_xmu : sum_dy_xhat;
  }
  if (a.sync) {
    sums[2 * s.C] = M;
    a.sync->all_reduce_sum(sums.data(), sums.size(), DType::f64);
    M = sums[2 * s.C];
    for (int64_t c = 0; c < s.C; ++c) sums[s.C + c] *= param<T>(a.save_invstd, c, 1.0);
  }
  if (!a.dx.defined) return;
  T* dx = a.dx.ptr<T>();
  for (int64_t c = 0; c < s.C; ++c) {
    const double mean = param<T>(a.save_mean, c, 0.0);
    const double invstd = param<T>(a.save_invstd, c, 1.0);
    const double g = param<T>(a.gamma, c, 1.0);
    const double sum_dy = sums[c], sum_dy_xhat = sums[s.C + c];
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
