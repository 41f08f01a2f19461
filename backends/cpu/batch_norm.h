#pragma once
// batch_norm as plain loops over contiguous NCHW planes (other layouts are packed first),
// statistics in double: the openblas backend's batch norm, and every CPU backend's
// synchronised one (op_args.h: sync). oneDNN's primitive and Eigen's expressions compute
// their statistics and normalise in one call, with no point between the two where the
// replicas' sums could be exchanged.
//
// Each op runs in phases over all channels: per-channel sums, the optional reduction over
// the replicas, then the normalisation (or dx) from the resulting coefficients. Plain
// statistics take two passes (mean, then centred variance); synchronised ones exchange
// sum x and sum x^2 (the latter from the centred sum, sum (x - mean)^2 + mean * sum x, so
// only the group's combination can cancel, in double).
#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "strata/backends/cpu/elementwise.h"
#include "strata/backends/cpu/reduce.h"
#include "strata/backends/cpu/strided.h"
#include "strata/ops/table/op_args.h"
#include "strata/ops/table/relu_mask.h"

namespace strata::backends::loops {

namespace bn {

// Element c of a 1-D per-channel view (gamma, running stats...), or `dflt` if absent.
template <class T>
double chan(const ops::TensorView& v, int64_t c, double dflt) {
  return v.defined ? static_cast<double>(v.ptr<const T>()[c * v.strides[0]]) : dflt;
}
template <class T>
void set_chan(const ops::TensorView& v, int64_t c, double value) {
  if (v.defined) v.ptr<T>()[c * v.strides[0]] = static_cast<T>(value);
}

struct Dims {
  int64_t n, c, hw;
  int64_t m() const { return n * hw; }  // elements per channel
  int64_t plane(int64_t ni, int64_t ci) const { return (ni * c + ci) * hw; }
};
inline Dims dims(const ops::TensorView& x) {
  int64_t hw = 1;
  for (int d = 2; d < x.dim(); ++d) hw *= x.sizes[d];
  return {x.sizes[0], x.sizes[1], hw};
}

// The forward without its fusions (op_args.h).
template <class T>
void forward(const ops::BatchNormFwdArgs& a, std::string_view backend) {
  const Dims d = dims(a.x);
  ContiguousIn<T> xin(a.x);
  ContiguousOut<T> yout(a.y);
  const T* x = xin.get();
  T* y = yout.get();
  const double m = static_cast<double>(d.m());
  std::vector<double> mean(d.c), invstd(d.c);
  if (a.training) {
    std::vector<double> sum(d.c), ss(d.c);  // sum x, sum (x - mean)^2 of this replica's rows
    for (int64_t c = 0; c < d.c; ++c) {
      double s = 0;
      for (int64_t n = 0; n < d.n; ++n) s += sum_contiguous(x + d.plane(n, c), d.hw);
      mean[c] = s / m;
      sum[c] = s;
      double q = 0;
      for (int64_t n = 0; n < d.n; ++n) {
        const T* p = x + d.plane(n, c);
        for (int64_t i = 0; i < d.hw; ++i) {
          const double v = static_cast<double>(p[i]) - mean[c];
          q += v * v;
        }
      }
      ss[c] = q;
    }
    std::vector<double> group;  // the replicas' sum x, sum x^2, rows (op_args.h)
    if (a.sync) {
      group.resize(static_cast<size_t>(2 * d.c + 1));
      for (int64_t c = 0; c < d.c; ++c) {
        group[c] = sum[c];
        group[d.c + c] = ss[c] + mean[c] * sum[c];
      }
      group[2 * d.c] = m;
      a.sync->all_reduce_sum(group.data(), group.size(), DType::f64);
    }
    for (int64_t c = 0; c < d.c; ++c) {
      double var, unbiased;
      if (a.sync) {
        const double n = group[2 * d.c];
        mean[c] = group[c] / n;
        var = std::max(group[d.c + c] / n - mean[c] * mean[c], 0.0);
        unbiased = var * n / (n - 1.0);
      } else {
        var = ss[c] / m;
        unbiased = d.m() > 1 ? ss[c] / (m - 1.0) : var;
      }
      invstd[c] = 1.0 / std::sqrt(var + a.eps);
      if (a.running_mean.defined) {
        set_chan<T>(a.running_mean, c, (1.0 - a.momentum) * chan<T>(a.running_mean, c, 0.0) + a.momentum * mean[c]);
        set_chan<T>(a.running_var, c, (1.0 - a.momentum) * chan<T>(a.running_var, c, 1.0) + a.momentum * unbiased);
      }
    }
  } else {
    STRATA_CHECK(a.running_mean.defined && a.running_var.defined, backend,
                 ": batch_norm_fwd in eval mode needs running_mean and running_var");
    for (int64_t c = 0; c < d.c; ++c) {
      mean[c] = chan<T>(a.running_mean, c, 0.0);
      invstd[c] = 1.0 / std::sqrt(chan<T>(a.running_var, c, 1.0) + a.eps);
    }
  }
  for (int64_t c = 0; c < d.c; ++c) {
    set_chan<T>(a.save_mean, c, mean[c]);
    set_chan<T>(a.save_invstd, c, invstd[c]);
    // y = (x - mean) * gamma invstd + beta
    const T tm = static_cast<T>(mean[c]);
    const T scale = static_cast<T>(chan<T>(a.gamma, c, 1.0) * invstd[c]);
    const T shift = static_cast<T>(chan<T>(a.beta, c, 0.0));
    for (int64_t n = 0; n < d.n; ++n) {
      const T* p = x + d.plane(n, c);
      T* q = y + d.plane(n, c);
      for (int64_t i = 0; i < d.hw; ++i) q[i] = (p[i] - tm) * scale + shift;
    }
  }
  yout.finish();
}

// Training: dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)), the means over the
// group's rows when synchronised; dgamma and dbeta are this replica's sums either way.
// Eval (statistics were constants): dx = gamma invstd dy.
template <class T>
void backward(const ops::BatchNormBwdArgs& a) {
  const Dims d = dims(a.x);
  ContiguousIn<T> xin(a.x), dyin(a.dy);
  ContiguousOut<T> dxout(a.dx);
  const T* x = xin.get();
  const T* dy = dyin.get();
  T* dx = dxout.get();
  double m = static_cast<double>(d.m());
  // sum dy [C], sum dy (x - mean) [C], rows: this replica's, then the group's.
  std::vector<double> sums(static_cast<size_t>(2 * d.c + 1));
  for (int64_t c = 0; c < d.c; ++c) {
    const double mean = chan<T>(a.save_mean, c, 0.0);
    double sdy = 0, sdyx = 0;
    for (int64_t n = 0; n < d.n; ++n) {
      const T* p = x + d.plane(n, c);
      const T* g = dy + d.plane(n, c);
      for (int64_t i = 0; i < d.hw; ++i) {
        sdy += static_cast<double>(g[i]);
        sdyx += static_cast<double>(g[i]) * (static_cast<double>(p[i]) - mean);
      }
    }
    set_chan<T>(a.dgamma, c, sdyx * chan<T>(a.save_invstd, c, 1.0));
    set_chan<T>(a.dbeta, c, sdy);
    sums[c] = sdy;
    sums[d.c + c] = sdyx;
  }
  if (a.sync) {
    sums[2 * d.c] = m;
    a.sync->all_reduce_sum(sums.data(), sums.size(), DType::f64);
    m = sums[2 * d.c];
  }
  if (!a.dx.defined) return;
  for (int64_t c = 0; c < d.c; ++c) {
    const double mean = chan<T>(a.save_mean, c, 0.0);
    const double invstd = chan<T>(a.save_invstd, c, 1.0);
    const double sdy = sums[c], sdyx = sums[d.c + c];
    const double gi = chan<T>(a.gamma, c, 1.0) * invstd;
    // dx = k1 dy + k2 (x - mean) + k0
    const double k1 = gi;
    const double k2 = a.training ? -gi * invstd * invstd * sdyx / m : 0.0;
    const double k0 = a.training ? -gi * sdy / m : 0.0;
    const T t1 = static_cast<T>(k1), t2 = static_cast<T>(k2), t0 = static_cast<T>(k0), tm = static_cast<T>(mean);
    for (int64_t n = 0; n < d.n; ++n) {
      const T* p = x + d.plane(n, c);
      const T* g = dy + d.plane(n, c);
      T* q = dx + d.plane(n, c);
      for (int64_t i = 0; i < d.hw; ++i) q[i] = t1 * g[i] + t2 * (p[i] - tm) + t0;
    }
  }
  dxout.finish();
}

}  // namespace bn

// The whole op for a backend called `backend` (its name in errors): the fusions of
// op_args.h included, f32 and f64.
inline void batch_norm_fwd(std::string_view backend, const ops::BatchNormFwdArgs& a) {
  if (has_epilogue(a)) {  // the plain batch norm, then the fused residual add and ReLU
    batch_norm_fwd(backend, without_epilogue(a));
    return visit_float(backend, "batch_norm_fwd", a.y.dtype, [&](auto t) { epilogue<decltype(t)>(a); });
  }
  visit_float(backend, "batch_norm_fwd", a.x.dtype, [&](auto t) { bn::forward<decltype(t)>(a, backend); });
}
inline void batch_norm_bwd(std::string_view backend, const ops::BatchNormBwdArgs& a) {
  visit_float(backend, "batch_norm_bwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    ops::masked_batch_norm_bwd<T>(a, [](const ops::BatchNormBwdArgs& b) { bn::backward<T>(b); });
  });
}

}  // namespace strata::backends::loops
