// batch_norm as plain loops over contiguous NCHW planes (other layouts are packed
// first), statistics in double with two passes (mean, then centred variance).
#include <cmath>
#include <vector>

#include "strata/backends/cpu/elementwise.h"
#include "strata/backends/cpu/reduce.h"
#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using loops::ContiguousIn;
using loops::ContiguousOut;
using loops::visit_float;

namespace {

// Element c of a 1-D per-channel view (gamma, running stats...), or `dflt` if absent.
template <class T>
double chan(const TensorView& v, int64_t c, double dflt) {
  return v.defined ? static_cast<double>(v.ptr<const T>()[c * v.strides[0]]) : dflt;
}
template <class T>
void set_chan(const TensorView& v, int64_t c, double value) {
  if (v.defined) v.ptr<T>()[c * v.strides[0]] = static_cast<T>(value);
}

struct Dims {
  int64_t n, c, hw;
  int64_t m() const { return n * hw; }  // elements per channel
  int64_t plane(int64_t ni, int64_t ci) const { return (ni * c + ci) * hw; }
};
Dims dims(const TensorView& x) {
  int64_t hw = 1;
  for (int d = 2; d < x.dim(); ++d) hw *= x.sizes[d];
  return {x.sizes[0], x.sizes[1], hw};
}

template <class T>
void forward(const BatchNormFwdArgs& a) {
  const Dims d = dims(a.x);
  ContiguousIn<T> xin(a.x);
  ContiguousOut<T> yout(a.y);
  const T* x = xin.get();
  T* y = yout.get();
  const double m = static_cast<double>(d.m());
  for (int64_t c = 0; c < d.c; ++c) {
    double mean, invstd;
    if (a.training) {
      double s = 0;
      for (int64_t n = 0; n < d.n; ++n) s += loops::sum_contiguous(x + d.plane(n, c), d.hw);
      mean = s / m;
      double ss = 0;
      for (int64_t n = 0; n < d.n; ++n) {
        const T* p = x + d.plane(n, c);
        for (int64_t i = 0; i < d.hw; ++i) {
          const double v = static_cast<double>(p[i]) - mean;
          ss += v * v;
        }
      }
      const double var = ss / m;
      invstd = 1.0 / std::sqrt(var + a.eps);
      if (a.running_mean.defined) {
        const double unbiased = d.m() > 1 ? ss / (m - 1.0) : var;
        set_chan<T>(a.running_mean, c, (1.0 - a.momentum) * chan<T>(a.running_mean, c, 0.0) + a.momentum * mean);
        set_chan<T>(a.running_var, c, (1.0 - a.momentum) * chan<T>(a.running_var, c, 1.0) + a.momentum * unbiased);
      }
    } else {
      STRATA_CHECK(a.running_mean.defined && a.running_var.defined,
                   "openblas: batch_norm_fwd in eval mode needs running_mean and running_var");
      mean = chan<T>(a.running_mean, c, 0.0);
      invstd = 1.0 / std::sqrt(chan<T>(a.running_var, c, 1.0) + a.eps);
    }
    set_chan<T>(a.save_mean, c, mean);
    set_chan<T>(a.save_invstd, c, invstd);
    // y = (x - mean) * gamma invstd + beta
    const T tm = static_cast<T>(mean);
    const T scale = static_cast<T>(chan<T>(a.gamma, c, 1.0) * invstd);
    const T shift = static_cast<T>(chan<T>(a.beta, c, 0.0));
    for (int64_t n = 0; n < d.n; ++n) {
      const T* p = x + d.plane(n, c);
      T* q = y + d.plane(n, c);
      for (int64_t i = 0; i < d.hw; ++i) q[i] = (p[i] - tm) * scale + shift;
    }
  }
  yout.finish();
}

// Training: dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)).
// Eval (statistics were constants): dx = gamma invstd dy.
template <class T>
void backward(const BatchNormBwdArgs& a) {
  const Dims d = dims(a.x);
  ContiguousIn<T> xin(a.x), dyin(a.dy);
  ContiguousOut<T> dxout(a.dx);
  const T* x = xin.get();
  const T* dy = dyin.get();
  T* dx = dxout.get();
  const double m = static_cast<double>(d.m());
  for (int64_t c = 0; c < d.c; ++c) {
    const double mean = chan<T>(a.save_mean, c, 0.0);
    const double invstd = chan<T>(a.save_invstd, c, 1.0);
    double sdy = 0, sdyx = 0;  // sum dy, sum dy (x - mean)
    for (int64_t n = 0; n < d.n; ++n) {
      const T* p = x + d.plane(n, c);
      const T* g = dy + d.plane(n, c);
      for (int64_t i = 0; i < d.hw; ++i) {
        sdy += static_cast<double>(g[i]);
        sdyx += static_cast<double>(g[i]) * (static_cast<double>(p[i]) - mean);
      }
    }
    set_chan<T>(a.dgamma, c, sdyx * invstd);
    set_chan<T>(a.dbeta, c, sdy);
    const double gi = chan<T>(a.gamma, c, 1.0) * invstd;
    if (!a.dx.defined) continue;
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
  if (a.dx.defined) dxout.finish();
}

}  // namespace

void OpenBlasBackend::batch_norm_fwd(const BatchNormFwdArgs& a) {
  if (loops::has_epilogue(a)) {  // the plain batch norm, then the fused residual add and ReLU
    batch_norm_fwd(loops::without_epilogue(a));
    return visit_float(kName, "batch_norm_fwd", a.y.dtype, [&](auto t) { loops::epilogue<decltype(t)>(a); });
  }
  visit_float(kName, "batch_norm_fwd", a.x.dtype, [&](auto t) { forward<decltype(t)>(a); });
}
void OpenBlasBackend::batch_norm_bwd(const BatchNormBwdArgs& a) {
  visit_float(kName, "batch_norm_bwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    ops::masked_batch_norm_bwd<T>(a, [](const BatchNormBwdArgs& b) { backward<T>(b); });
  });
}

}  // namespace strata::backends
