#pragma once
// Losses as plain loops, accumulating in double. Softmax cross-entropy is the mean over the
// rows not ignored of logsumexp(x_n) - x_n[label_n], saving logsumexp per row for a backward
// that reads the logits again (op_args.h, SoftmaxXentFwdArgs); BCE with logits the mean over
// all elements of max(x,0) - x t + log1p(exp(-|x|)).
#include <algorithm>
#include <cmath>

#include "strata/backends/cpu/strided.h"
#include "strata/ops/table/op_args.h"
#include "strata/ops/table/xent_labels.h"

namespace strata::backends::loops {

// Label n of an i64 (or i32) label vector: a class in [0, classes) or ignore_index.
inline int64_t label_at(const ops::TensorView& labels, int64_t n, int64_t classes, int64_t ignore_index,
                        std::string_view op) {
  int64_t l = 0;
  if (labels.dtype == DType::i64) {
    l = labels.ptr<const int64_t>()[n * labels.strides[0]];
  } else if (labels.dtype == DType::i32) {
    l = labels.ptr<const int32_t>()[n * labels.strides[0]];
  } else {
    STRATA_FAIL(op, ": labels must be i64 or i32, got ", dtype_name(labels.dtype));
  }
  if (!ops::xent_label_valid(l, classes, ignore_index)) ops::fail_xent_label(op, n, l, classes, ignore_index);
  return l;
}

// lse_n = logsumexp(x_n) for every row (ignored ones too: the saved statistic does not depend
// on the labels), the loss the mean over the kept rows; 0/0 = NaN when none is kept. The lse is
// stored as T: the CPU backends run f32 and f64, whose ops::stats_dtype is the dtype itself.
// The rows' arithmetic over plain pointers, `label(i)` giving row i's label (validated by the
// caller). The code between "codegen:begin" and "codegen:end" is also written, as it is, into
// the training steps codegen/ generates, so that they compute the loss as this loop does.
// codegen:begin train_loops
// Saves lse_i for every row and returns the mean of lse_i - x_i[label_i] over the rows kept.
template <class T, class Label>
T softmax_xent_rows(const T* x, int64_t n, int64_t c, int64_t s0, int64_t s1, T* lse, int64_t lse_stride,
                    int64_t ignore_index, Label&& label) {
  double total = 0;
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = label(i);
    const T* row = x + i * s0;
    double m = -INFINITY;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, static_cast<double>(row[j * s1]));
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(static_cast<double>(row[j * s1]) - m);
    const double row_lse = m + std::log(s);
    lse[i * lse_stride] = static_cast<T>(row_lse);
    if (l == ignore_index) continue;
    total += row_lse - static_cast<double>(row[l * s1]);
    ++kept;
  }
  return static_cast<T>(total / static_cast<double>(kept));
}
// codegen:end

// lse_n = logsumexp(x_n) for every row (ignored ones too: the saved statistic does not depend
// on the labels), the loss the mean over the kept rows; 0/0 = NaN when none is kept. The lse is
// stored as T: the CPU backends run f32 and f64, whose ops::stats_dtype is the dtype itself.
template <class T>
void softmax_xent_fwd(const ops::SoftmaxXentFwdArgs& a) {
  const int64_t n = a.logits.sizes[0], c = a.logits.sizes[1];
  *a.loss.ptr<T>() = softmax_xent_rows(a.logits.ptr<const T>(), n, c, a.logits.strides[0], a.logits.strides[1],
                                       a.lse.ptr<T>(), a.lse.strides[0], a.ignore_index, [&](int64_t i) {
                                         return label_at(a.labels, i, c, a.ignore_index, "softmax_xent_fwd");
                                       });
}

// codegen:begin train_loops
// dlogits_i = (exp(x_i - lse_i) - onehot(label_i)) * dloss / kept, zero on ignored rows.
template <class T, class Label>
void softmax_xent_grad_rows(const T* x, int64_t n, int64_t c, int64_t x0, int64_t x1, const T* lse,
                            int64_t lse_stride, T dloss, T* d, int64_t d0, int64_t d1, int64_t ignore_index,
                            Label&& label) {
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) kept += label(i) != ignore_index;
  const T g = static_cast<T>(static_cast<double>(dloss) / static_cast<double>(kept));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = label(i);
    T* dr = d + i * d0;
    if (l == ignore_index) {
      for (int64_t j = 0; j < c; ++j) dr[j * d1] = T(0);
      continue;
    }
    const T* xr = x + i * x0;
    const T m = lse[i * lse_stride];
    for (int64_t j = 0; j < c; ++j) dr[j * d1] = std::exp(xr[j * x1] - m) * g;
    dr[l * d1] = (std::exp(xr[l * x1] - m) - T(1)) * g;
  }
}
// codegen:end

// dlogits_n = (exp(x_n - lse_n) - onehot(label_n)) * dloss / kept, zero on ignored rows; in T,
// from the saved lse (so every backend's softmax here is the one its forward's lse defines).
template <class T>
void softmax_xent_bwd(const ops::SoftmaxXentBwdArgs& a) {
  const int64_t n = a.logits.sizes[0], c = a.logits.sizes[1];
  softmax_xent_grad_rows(a.logits.ptr<const T>(), n, c, a.logits.strides[0], a.logits.strides[1], a.lse.ptr<const T>(),
                         a.lse.strides[0], *a.dloss.ptr<const T>(), a.dlogits.ptr<T>(), a.dlogits.strides[0],
                         a.dlogits.strides[1], a.ignore_index, [&](int64_t i) {
                           return label_at(a.labels, i, c, a.ignore_index, "softmax_xent_bwd");
                         });
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
