#pragma once
// Losses as plain loops, accumulating in double. Softmax cross-entropy is the mean
// over the batch of logsumexp(x_n) - x_n[label]; BCE with logits the mean over all
// elements of max(x,0) - x t + log1p(exp(-|x|)).
#include <cmath>
#include <vector>

#include "strata/backends/cpu/strided.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

// Label n of an i64 (or i32) label vector, checked against the class count.
inline int64_t label_at(const ops::TensorView& labels, int64_t n, int64_t classes, std::string_view op) {
  int64_t l = 0;
  if (labels.dtype == DType::i64) {
    l = labels.ptr<const int64_t>()[n * labels.strides[0]];
  } else if (labels.dtype == DType::i32) {
    l = labels.ptr<const int32_t>()[n * labels.strides[0]];
  } else {
    STRATA_FAIL(op, ": labels must be i64 or i32, got ", dtype_name(labels.dtype));
  }
  STRATA_CHECK(l >= 0 && l < classes, op, ": label ", l, " at index ", n, " is outside [0, ", classes, ")");
  return l;
}

// Per-row log-sum-exp of logits [N,C] (any strides), in double.
template <class T>
void row_logsumexp(const ops::TensorView& logits, std::vector<double>& lse, std::vector<double>& rowmax) {
  const int64_t n = logits.sizes[0], c = logits.sizes[1];
  const int64_t s0 = logits.strides[0], s1 = logits.strides[1];
  const T* x = logits.ptr<const T>();
  lse.assign(static_cast<size_t>(n), 0.0);
  rowmax.assign(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const T* row = x + i * s0;
    double m = -INFINITY;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, static_cast<double>(row[j * s1]));
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(static_cast<double>(row[j * s1]) - m);
    rowmax[i] = m;
    lse[i] = m + std::log(s);
  }
}

// Loss from logits only; probabilities are written by `write_probs` when true.
template <class T>
void softmax_xent_fwd(const ops::SoftmaxXentFwdArgs& a, bool write_probs) {
  const int64_t n = a.logits.sizes[0], c = a.logits.sizes[1];
  std::vector<double> lse, rowmax;
  row_logsumexp<T>(a.logits, lse, rowmax);
  const T* x = a.logits.ptr<const T>();
  const int64_t s0 = a.logits.strides[0], s1 = a.logits.strides[1];
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = label_at(a.labels, i, c, "softmax_xent_fwd");
    total += lse[i] - static_cast<double>(x[i * s0 + l * s1]);
  }
  *a.loss.ptr<T>() = static_cast<T>(n > 0 ? total / static_cast<double>(n) : 0.0);
  if (!write_probs || !a.probs.defined) return;
  T* p = a.probs.ptr<T>();
  const int64_t p0 = a.probs.strides[0], p1 = a.probs.strides[1];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      p[i * p0 + j * p1] = static_cast<T>(std::exp(static_cast<double>(x[i * s0 + j * s1]) - lse[i]));
}

// dlogits = (probs - onehot(label)) * dloss / N
template <class T>
void softmax_xent_bwd(const ops::SoftmaxXentBwdArgs& a) {
  const int64_t n = a.probs.sizes[0], c = a.probs.sizes[1];
  const T g = static_cast<T>(static_cast<double>(*a.dloss.ptr<const T>()) / static_cast<double>(n));
  const T* p = a.probs.ptr<const T>();
  T* d = a.dlogits.ptr<T>();
  const int64_t p0 = a.probs.strides[0], p1 = a.probs.strides[1];
  const int64_t d0 = a.dlogits.strides[0], d1 = a.dlogits.strides[1];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = label_at(a.labels, i, c, "softmax_xent_bwd");
    for (int64_t j = 0; j < c; ++j) d[i * d0 + j * d1] = p[i * p0 + j * p1] * g;
    d[i * d0 + l * d1] = (p[i * p0 + l * p1] - T(1)) * g;
  }
}

template <class T>
void bce_logits_fwd(const ops::BceLogitsFwdArgs& a) {
  const T* x = a.logits.ptr<const T>();
  const T* t = a.targets.ptr<const T>();
  double total = 0;
  for_each_element([&](int64_t, int64_t ox, int64_t ot) {
    const double v = x[ox], tv = t[ot];
    total += std::max(v, 0.0) - v * tv + std::log1p(std::exp(-std::fabs(v)));
  }, a.logits, a.targets);
  const int64_t n = a.logits.numel();
  *a.loss.ptr<T>() = static_cast<T>(n > 0 ? total / static_cast<double>(n) : 0.0);
}

// dlogits = (sigmoid(x) - t) * dloss / numel
template <class T>
void bce_logits_bwd(const ops::BceLogitsBwdArgs& a) {
  const T* x = a.logits.ptr<const T>();
  const T* t = a.targets.ptr<const T>();
  T* d = a.dlogits.ptr<T>();
  const double g = static_cast<double>(*a.dloss.ptr<const T>()) / static_cast<double>(a.logits.numel());
  for_each_unordered([=](int64_t, int64_t ox, int64_t ot, int64_t od) {
    const double v = x[ox];
    const double s = v >= 0 ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v) / (1.0 + std::exp(v));
    d[od] = static_cast<T>((s - static_cast<double>(t[ot])) * g);
  }, a.logits, a.targets, a.dlogits);
}

}  // namespace strata::backends::loops
