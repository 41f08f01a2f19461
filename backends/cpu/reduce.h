#pragma once
// Reductions as plain loops: sums accumulate in double over eight fixed lanes (so the
// compiler vectorises them and the result does not depend on threads: deterministic),
// argmax keeps the first maximum (NaN counting as the largest).
#include <cmath>
#include <vector>

#include "strata/backends/cpu/strided.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

// The code between "codegen:begin" and "codegen:end" is also written, as it is, into the
// training steps codegen/ generates, so that their bias gradients sum as these loops do.
// codegen:begin train_loops
// Sum of n contiguous values in double, in a fixed order.
template <class T>
double sum_contiguous(const T* x, int64_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += static_cast<double>(x[i + j]);
  double s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += static_cast<double>(x[i]);
  return s;
}

// out[k] = sum over n, h, w of p[n, k, h, w] at strides st, in double.
template <class T>
void channel_sums(const T* p, const int64_t (&sizes)[4], const int64_t (&st)[4], T* out, int64_t out_stride) {
  const int64_t nn = sizes[0], kk = sizes[1], hh = sizes[2], ww = sizes[3];
  const bool planes = st[3] == 1 && st[2] == ww;  // each (n, k) plane is contiguous
  for (int64_t k = 0; k < kk; ++k) {
    double s = 0;
    for (int64_t n = 0; n < nn; ++n) {
      const T* base = p + n * st[0] + k * st[1];
      if (planes) {
        s += sum_contiguous(base, hh * ww);
        continue;
      }
      for (int64_t h = 0; h < hh; ++h)
        for (int64_t w = 0; w < ww; ++w) s += static_cast<double>(base[h * st[2] + w * st[3]]);
    }
    out[k * out_stride] = static_cast<T>(s);
  }
}

// d[o] = sum over the n rows of p [n, out] at strides (s0, s1), in double and in row order.
template <class T>
void column_sums_of(const T* p, int64_t n, int64_t out, int64_t s0, int64_t s1, T* d, int64_t d_stride) {
  std::vector<double> acc(static_cast<size_t>(out), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) acc[o] += static_cast<double>(p[i * s0 + o * s1]);
  for (int64_t o = 0; o < out; ++o) d[o * d_stride] = static_cast<T>(acc[o]);
}
// codegen:end

template <class T>
double sum_all(const ops::TensorView& v) {
  const T* x = v.ptr<const T>();
  if (is_dense(v)) return sum_contiguous(x, v.numel());
  double s = 0;
  for_each_element([&](int64_t, int64_t o) { s += static_cast<double>(x[o]); }, v);
  return s;
}

// db[k] = sum over n, h, w of dy[n, k, h, w] (any strides), in double: the conv bias
// gradient.
template <class T>
void conv_bias_grad(const ops::TensorView& dy, const ops::TensorView& db) {
  const int64_t sizes[4] = {dy.sizes[0], dy.sizes[1], dy.sizes[2], dy.sizes[3]};
  const int64_t st[4] = {dy.strides[0], dy.strides[1], dy.strides[2], dy.strides[3]};
  channel_sums(dy.ptr<const T>(), sizes, st, db.ptr<T>(), db.strides[0]);
}

// db[o] = sum over rows of dy [N, out] (any strides), in double and in row order:
// the linear bias gradient.
template <class T>
void column_sums(const ops::TensorView& dy, const ops::TensorView& db) {
  column_sums_of(dy.ptr<const T>(), dy.sizes[0], dy.sizes[1], dy.strides[0], dy.strides[1], db.ptr<T>(),
                 db.strides[0]);
}

template <class T>
void sum(const ops::ReduceArgs& a) {
  *a.y.ptr<T>() = static_cast<T>(sum_all<T>(a.x));
}

template <class T>
void mean(const ops::ReduceArgs& a) {
  const int64_t n = a.x.numel();
  *a.y.ptr<T>() = static_cast<T>(n > 0 ? sum_all<T>(a.x) / static_cast<double>(n) : NAN);
}

// Whether v replaces m as a maximum: strictly larger, or the first NaN (NaN is the
// maximum, as in PyTorch).
template <class T>
bool beats(T v, T m) {
  return v > m || (std::isnan(v) && !std::isnan(m));
}

// x [N,C] -> y [N] (i64, or i32): index of the first maximum of each row.
template <class T>
void argmax(const ops::ArgmaxArgs& a) {
  const int64_t n = a.x.sizes[0], c = a.x.sizes[1];
  const int64_t s0 = a.x.strides[0], s1 = a.x.strides[1];
  const T* x = a.x.ptr<const T>();
  STRATA_CHECK(a.y.dtype == DType::i64 || a.y.dtype == DType::i32, "argmax: output must be i64 or i32, got ",
               dtype_name(a.y.dtype));
  for (int64_t i = 0; i < n; ++i) {
    const T* row = x + i * s0;
    int64_t best = 0;
    T m = row[0];
    for (int64_t j = 1; j < c; ++j) {
      const T v = row[j * s1];
      if (beats(v, m)) {
        m = v;
        best = j;
      }
    }
    if (a.y.dtype == DType::i64)
      a.y.ptr<int64_t>()[i * a.y.strides[0]] = best;
    else
      a.y.ptr<int32_t>()[i * a.y.strides[0]] = static_cast<int32_t>(best);
  }
}

}  // namespace strata::backends::loops
