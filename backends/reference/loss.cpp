// Losses. softmax cross-entropy: mean over the rows not ignored of -log softmax(logits)[label],
// with the max subtracted before exp; the backward recomputes the softmax from the saved lse.
// BCE with logits: mean over all elements of max(x,0) - x*t + log1p(exp(-|x|)), which never
// overflows.
#include <algorithm>
#include <cmath>

#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"
#include "strata/ops/table/xent_labels.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::for_each_element;
using ref::off2;
using ref::visit_float;

namespace {

int64_t label_at(const TensorView& labels, int64_t n, int64_t classes, int64_t ignore_index, const char* op) {
  STRATA_CHECK(labels.dtype == DType::i64, op, ": labels must be i64, got ", dtype_name(labels.dtype));
  const int64_t v = labels.ptr<int64_t>()[n * labels.strides[0]];
  if (!xent_label_valid(v, classes, ignore_index)) fail_xent_label(op, n, v, classes, ignore_index);
  return v;
}

template <class T>
double read_scalar(const TensorView& v) {
  return static_cast<double>(*v.ptr<T>());
}

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

}  // namespace

// lse[n] = logsumexp(logits[n]) for every row, stored as T (f32 and f64 are their own
// stats_dtype); the loss is the mean of lse[n] - logits[n, label] over the rows not ignored,
// 0/0 = NaN when every row is.
void ReferenceBackend::softmax_xent_fwd(const SoftmaxXentFwdArgs& a) {
  visit_float(a.logits.dtype, "softmax_xent_fwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.logits.ptr<T>();
    T* lse = a.lse.ptr<T>();
    const int64_t N = a.logits.sizes[0], C = a.logits.sizes[1];
    double total = 0.0, kept = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t label = label_at(a.labels, n, C, a.ignore_index, "softmax_xent_fwd");
      double m = -INFINITY;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(x[off2(a.logits, n, c)]));
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c) s += std::exp(static_cast<double>(x[off2(a.logits, n, c)]) - m);
      const double row_lse = m + std::log(s);
      lse[n * a.lse.strides[0]] = static_cast<T>(row_lse);
      if (label == a.ignore_index) continue;
      total += row_lse - static_cast<double>(x[off2(a.logits, n, label)]);
      kept += 1.0;
    }
    *a.loss.ptr<T>() = static_cast<T>(total / kept);
  });
}

// dlogits[n] = (exp(logits[n] - lse[n]) - onehot(label)) * dloss / kept, zero on ignored rows.
void ReferenceBackend::softmax_xent_bwd(const SoftmaxXentBwdArgs& a) {
  visit_float(a.logits.dtype, "softmax_xent_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.logits.ptr<T>();
    const T* lse = a.lse.ptr<T>();
    T* dx = a.dlogits.ptr<T>();
    const int64_t N = a.logits.sizes[0], C = a.logits.sizes[1];
    double kept = 0.0;
    for (int64_t n = 0; n < N; ++n)
      kept += label_at(a.labels, n, C, a.ignore_index, "softmax_xent_bwd") != a.ignore_index ? 1.0 : 0.0;
    const double g = read_scalar<T>(a.dloss) / kept;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t label = label_at(a.labels, n, C, a.ignore_index, "softmax_xent_bwd");
      const double row_lse = static_cast<double>(lse[n * a.lse.strides[0]]);
      for (int64_t c = 0; c < C; ++c) {
        const double p = std::exp(static_cast<double>(x[off2(a.logits, n, c)]) - row_lse);
        dx[off2(a.dlogits, n, c)] =
            label == a.ignore_index ? T(0) : static_cast<T>((p - (c == label ? 1.0 : 0.0)) * g);
      }
    }
  });
}

void ReferenceBackend::bce_logits_fwd(const BceLogitsFwdArgs& a) {
  visit_float(a.logits.dtype, "bce_logits_fwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.logits.ptr<T>();
    const T* t = a.targets.ptr<T>();
    double total = 0.0;
    for_each_element(
        [&](int64_t, int64_t ox, int64_t ot) {
          const double v = static_cast<double>(x[ox]), y = static_cast<double>(t[ot]);
          total += std::max(v, 0.0) - v * y + std::log1p(std::exp(-std::fabs(v)));
        },
        a.logits, a.targets);
    *a.loss.ptr<T>() = static_cast<T>(total / static_cast<double>(a.logits.numel()));
  });
}

// dlogits = (sigmoid(x) - t) * dloss / numel
void ReferenceBackend::bce_logits_bwd(const BceLogitsBwdArgs& a) {
  visit_float(a.logits.dtype, "bce_logits_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.logits.ptr<T>();
    const T* t = a.targets.ptr<T>();
    T* dx = a.dlogits.ptr<T>();
    const double g = read_scalar<T>(a.dloss) / static_cast<double>(a.logits.numel());
    for_each_element(
        [&](int64_t, int64_t ox, int64_t ot, int64_t odx) {
          dx[odx] = static_cast<T>((sigmoid(static_cast<double>(x[ox])) - static_cast<double>(t[ot])) * g);
        },
        a.logits, a.targets, a.dlogits);
  });
}

}  // namespace strata::backends
