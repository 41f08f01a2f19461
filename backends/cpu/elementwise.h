#pragma once
// Element-wise ops as plain loops over any strides (see strided.h). Views sharing
// one dense layout run as flat loops the compiler vectorises.
#include <cstdint>

#include "strata/backends/cpu/strided.h"
#include "strata/core/dtype_dispatch.h"
#include "strata/ops/table/op_args.h"
#include "strata/ops/table/relu_mask.h"

namespace strata::backends::loops {

// One element of ReLU, dropout, their gradients and add. The code between "codegen:begin" and
// "codegen:end" is also written, as it is, into the programs codegen/ generates, so that
// they compute these elements as the loops below do.
// codegen:begin train_loops
template <class T>
inline T relu_of(T x) {
  return x > T(0) ? x : T(0);
}
// y is ReLU's output: the gradient passes where it is positive.
template <class T>
inline T relu_grad_of(T y, T dy) {
  return y > T(0) ? dy : T(0);
}
inline double dropout_inv_keep(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }
template <class T>
inline T dropout_of(T x, bool keep, double inv_keep) {
  return keep ? static_cast<T>(x * inv_keep) : T(0);
}
template <class T>
inline T dropout_grad_of(T dy, uint8_t kept, double inv_keep) {
  return kept ? static_cast<T>(dy * inv_keep) : T(0);
}
template <class T>
void fill_dense(T* y, int64_t n, T v) {
  for (int64_t i = 0; i < n; ++i) y[i] = v;
}
template <class T>
inline T add_of(T a, T b) {
  return a + b;
}
// codegen:end

template <class T>
void relu_fwd(const ops::ReluFwdArgs& a) {
  const T* x = a.x.ptr<const T>();
  T* y = a.y.ptr<T>();
  for_each_unordered([x, y](int64_t, int64_t ox, int64_t oy) { y[oy] = relu_of(x[ox]); }, a.x, a.y);
}

template <class T>
void relu_bwd(const ops::ReluBwdArgs& a) {
  const T* y = a.y.ptr<const T>();
  const T* dy = a.dy.ptr<const T>();
  T* dx = a.dx.ptr<T>();
  for_each_unordered([y, dy, dx](int64_t, int64_t oy, int64_t ody, int64_t odx) {
    dx[odx] = relu_grad_of(y[oy], dy[ody]);
  }, a.y, a.dy, a.dx);
}

// The inference epilogue of batch norm and conv2d (op_args.h: z, relu): a backend runs the
// plain op on without_epilogue(a), then epilogue<T>(a) applies y = relu?(y + z) in place.
template <class Args>
bool has_epilogue(const Args& a) {
  return a.z.defined || a.relu;
}
template <class Args>
Args without_epilogue(Args a) {
  a.z = {};
  a.relu = false;
  if constexpr (requires { a.relu_mask; }) a.relu_mask = {};
  return a;
}
// Dense outputs (every offset 0 .. n - 1 once, z in y's memory order): the epilogue and
// fused training's ReLU mask (bit i of the mask: y[i] > 0) in one pass over blocks of 64
// outputs (8 mask bytes), each block's values computed in a loop the compiler vectorises and
// its mask packed while they are in cache, the blocks over the OpenMP threads where the
// backend is built with them. False when the views are not dense alike.
template <class T>
bool dense_epilogue(const ops::TensorView& yv, const ops::TensorView& zv, bool relu, uint8_t* mask) {
  if (!ops::dense_for_mask(yv) || (zv.defined && !ops::same_memory_order(yv, zv))) return false;
  T* y = yv.ptr<T>();
  const T* z = zv.defined ? zv.ptr<const T>() : nullptr;
  const int64_t n = yv.numel();
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= ops::kMaskParallelAbove)
#endif
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t i0 = blk * kBlock, len = n - i0 < kBlock ? n - i0 : kBlock;
    T* yb = y + i0;
    if (z) {
      const T* zb = z + i0;
      for (int64_t j = 0; j < len; ++j) {
        const T v = yb[j] + zb[j];
        yb[j] = relu && !(v > T(0)) ? T(0) : v;
      }
    } else {
      for (int64_t j = 0; j < len; ++j) yb[j] = yb[j] > T(0) ? yb[j] : T(0);
    }
    if (!mask) continue;
    for (int64_t b = 0; b * 8 < len; ++b) {
      uint8_t bits = 0;
      for (int64_t j = 0; j < 8 && b * 8 + j < len; ++j)
        bits |= static_cast<uint8_t>(static_cast<unsigned>(yb[b * 8 + j] > T(0)) << j);
      mask[i0 / 8 + b] = bits;
    }
  }
  return true;
}

// Fused training's ReLU mask (batch norm's relu_mask) is written from the result.
template <class T, class Args>
void epilogue(const Args& a) {
  uint8_t* mask = nullptr;
  if constexpr (requires { a.relu_mask; })
    if (a.relu_mask.defined) mask = a.relu_mask.template ptr<uint8_t>();
  if (dense_epilogue<T>(a.y, a.z, a.relu, mask)) return;
  T* y = a.y.template ptr<T>();
  const bool relu = a.relu;
  if (!a.z.defined) {
    for_each_unordered([y](int64_t, int64_t oy) { y[oy] = y[oy] > T(0) ? y[oy] : T(0); }, a.y);
  } else {
    const T* z = a.z.template ptr<const T>();
    for_each_unordered([y, z, relu](int64_t, int64_t oy, int64_t oz) {
      const T v = y[oy] + z[oz];
      y[oy] = relu && !(v > T(0)) ? T(0) : v;
    }, a.y, a.z);
  }
  if constexpr (requires { a.relu_mask; }) ops::write_relu_mask<T>(a);
}

template <class T>
void add(const ops::AddArgs& a) {
  const T* pa = a.a.ptr<const T>();
  const T* pb = a.b.ptr<const T>();
  T* y = a.y.ptr<T>();
  for_each_unordered([pa, pb, y](int64_t, int64_t oa, int64_t ob, int64_t oy) { y[oy] = add_of(pa[oa], pb[ob]); }, a.a,
                     a.b, a.y);
}

template <class T>
void scale(const ops::ScaleArgs& a) {
  const T* x = a.x.ptr<const T>();
  T* y = a.y.ptr<T>();
  const T alpha = static_cast<T>(a.alpha);
  for_each_unordered([x, y, alpha](int64_t, int64_t ox, int64_t oy) { y[oy] = alpha * x[ox]; }, a.x, a.y);
}

template <class T>
void axpy(const ops::AxpyArgs& a) {
  const T* x = a.x.ptr<const T>();
  T* y = a.y.ptr<T>();
  const T alpha = static_cast<T>(a.alpha);
  for_each_unordered([x, y, alpha](int64_t, int64_t ox, int64_t oy) { y[oy] += alpha * x[ox]; }, a.x, a.y);
}

// Any dtype: the value converts as a copy from f64 would.
inline void fill(const ops::FillArgs& a) {
  visit_dtype(a.y.dtype, [&](auto t) {
    using T = decltype(t);
    T* y = a.y.ptr<T>();
    const T v = convert_element<T>(a.value);
    if (is_dense(a.y)) return fill_dense(y, a.y.numel(), v);
    for_each_unordered([y, v](int64_t, int64_t oy) { y[oy] = v; }, a.y);
  });
}

// The mask depends on each element's logical (row-major) index, so any layout gives
// the same mask as every other backend for the same seed.
template <class T>
void dropout_fwd(const ops::DropoutFwdArgs& args) {
  const ops::DropoutFwdArgs a = ops::with_rng_read(args);
  const T* x = a.x.ptr<const T>();
  T* y = a.y.ptr<T>();
  uint8_t* m = a.mask.ptr<uint8_t>();
  const double inv_keep = dropout_inv_keep(a.p);
  const uint64_t seed = a.seed, offset = a.offset;
  const double p = a.p;
  for_each_element([=](int64_t k, int64_t ox, int64_t oy, int64_t om) {
    const bool keep = ops::dropout_keep(seed, offset + static_cast<uint64_t>(k), p);
    m[om] = keep ? 1 : 0;
    y[oy] = dropout_of(x[ox], keep, inv_keep);
  }, a.x, a.y, a.mask);
}

template <class T>
void dropout_bwd(const ops::DropoutBwdArgs& a) {
  const T* dy = a.dy.ptr<const T>();
  const uint8_t* m = a.mask.ptr<const uint8_t>();
  T* dx = a.dx.ptr<T>();
  const double inv_keep = dropout_inv_keep(a.p);
  for_each_unordered([=](int64_t, int64_t ody, int64_t om, int64_t odx) {
    dx[odx] = dropout_grad_of(dy[ody], m[om], inv_keep);
  }, a.dy, a.mask, a.dx);
}

}  // namespace strata::backends::loops
