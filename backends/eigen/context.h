#pragma once
// Internal to backends/eigen: the thread pool and device one EigenBackend owns, and
// the views every op file builds on: strata's memory as Eigen TensorMaps (flat, or in
// logical index order for any slice or permutation of a dense tensor), 4-D tensors
// packed into the layout a kernel runs in, and work split over the pool's threads.
// Everything is RowMajor, as in TensorFlow: a map's last dimension is the innermost.
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/backends/cpu/strided.h"
#include "strata/backends/eigen/eigen_backend.h"
#include "strata/core/error.h"

namespace strata::backends::eigen {

using Eigen::Index;
using ops::TensorView;

template <class T, int R>
using Map = Eigen::TensorMap<Eigen::Tensor<T, R, Eigen::RowMajor, Index>>;
template <int R>
using Dims = Eigen::DSizes<Index, R>;
using Device = Eigen::ThreadPoolDevice;
using Serial = Eigen::DefaultDevice;

// Uninitialised, growing memory for packed operands and patch blocks.
class Buffer {
 public:
  template <class T>
  T* get(Index count) {
    const size_t bytes = static_cast<size_t>(count > 0 ? count : 1) * sizeof(T);
    if (bytes > size_) {
      data_.reset(static_cast<std::byte*>(Eigen::internal::aligned_malloc(bytes)));
      size_ = bytes;
    }
    return reinterpret_cast<T*>(data_.get());
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { Eigen::internal::aligned_free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t size_ = 0;
};

struct Context {
  Context();
  int threads;
  bool spinning;
  Eigen::ThreadPool pool;
  Device device;
  // Per work slot (see for_slots): patch blocks, accumulators, partial sums.
  std::vector<std::array<Buffer, 2>> slots;
};

// Calls f(slot) for slot in [0, n) on n threads of the pool (slot 0 on the calling
// thread) and waits. f must not throw.
template <class F>
void for_slots(Context& ctx, int n, F&& f) {
  if (n <= 1) {
    f(0);
    return;
  }
  Eigen::Barrier done(static_cast<unsigned>(n - 1));
  for (int i = 1; i < n; ++i) ctx.pool.Schedule([&f, &done, i] {
    f(i);
    done.Notify();
  });
  f(0);
  done.Wait();
}

// Calls f(T{}) with T = float or double for `dt`; other dtypes raise the eigen-named error.
template <class F>
decltype(auto) visit_float(std::string_view op, DType dt, F&& f) {
  return loops::visit_float(EigenBackend::kName, op, dt, std::forward<F>(f));
}

// ------------------------------------------------------------------ layouts

using loops::is_dense;
using loops::same_layout;

template <class T>
Map<T, 1> flat(const ops::TensorView& v) {
  return Map<T, 1>(v.ptr<T>(), v.numel());
}
template <class T>
Map<T, 0> scalar(const ops::TensorView& v) {
  return Map<T, 0>(v.ptr<T>());
}

// Any view that is a slice or permutation of a dense tensor, as an Eigen expression
// of rank kMaxDims in logical (row-major) index order, sizes padded with leading 1s:
// the memory it spans as a dense envelope, sliced, reshaped and shuffled into place.
// A view read (T const) may also repeat along dims of stride 0 (a broadcast operand):
// those are laid out as size 1 and broadcast back. An overlapping view otherwise, or
// one whose strides do not nest, is a strata::Error.
inline constexpr int kRank = kMaxDims;
struct StridedPlan {
  Dims<kRank + 1> envelope, extents;
  Dims<kRank> reshaped, logical;
  Eigen::array<Index, kRank> shuffle, repeat;
};
StridedPlan strided_plan(const ops::TensorView& v, std::string_view op, std::string_view arg, bool read_only);

template <class T>
class Strided {
 public:
  Strided(const ops::TensorView& v, std::string_view op, std::string_view arg)
      : plan_(strided_plan(v, op, arg, std::is_const_v<T>)), map_(v.ptr<T>(), plan_.envelope) {}
  auto expr() {
    auto e = map_.slice(Dims<kRank + 1>{}, plan_.extents).reshape(plan_.reshaped).shuffle(plan_.shuffle);
    if constexpr (std::is_const_v<T>)
      return e.broadcast(plan_.repeat);  // all 1s (Eigen's copy path) unless the view repeats
    else
      return e;
  }
  const Dims<kRank>& logical() const { return plan_.logical; }

 private:
  StridedPlan plan_;
  Map<T, kRank + 1> map_;
};

// An element type tag for elementwise(): In<T>{view} reads T, Out<T>{view} writes T.
template <class T>
struct In {
  const ops::TensorView& v;
};
template <class T>
struct Out {
  const ops::TensorView& v;
};

// out = f(in...) element by element, with f a generic lambda over Eigen expressions.
// Views that share one dense layout are walked as flat arrays in memory order (unless
// `logical_order`: then only when all are row-major contiguous); others as Strided
// expressions. Generators inside f see coordinates of rank 1 or kRank accordingly.
template <class TO, class... TI, class F>
void elementwise(Context& ctx, std::string_view op, bool logical_order, F&& f, Out<TO> out, In<TI>... in) {
  if (out.v.numel() == 0) return;
  const bool flat_ok = logical_order ? (out.v.is_contiguous() && (in.v.is_contiguous() && ...))
                                     : (is_dense(out.v) && (same_layout(out.v, in.v) && ...));
  if (flat_ok) {
    flat<TO>(out.v).device(ctx.device) = f(flat<const TI>(in.v)...);
    return;
  }
  Strided<TO> o(out.v, op, "output");
  std::tuple<Strided<const TI>...> ins{Strided<const TI>(in.v, op, "input")...};
  std::apply([&](auto&... s) { o.expr().device(ctx.device) = f(s.expr()...); }, ins);
}

// Row-major linear index of Eigen generator coordinates (rank 1: already linear).
template <size_t R>
Index linear_index(const std::array<Index, R>& c, const Dims<kRank>& sizes) {
  if constexpr (R == 1) {
    (void)sizes;
    return c[0];
  } else {
    Index k = 0;
    for (size_t d = 0; d < R; ++d) k = k * sizes[static_cast<int>(d)] + c[d];
    return k;
  }
}

// ------------------------------------------------------------------ 4-D layouts

enum class Layout { nchw, nhwc };
// The layout a 4-D kernel runs in for this view: channels-last when the view is
// channels-last dense (and not also contiguous), else NCHW.
Layout layout_of(const ops::TensorView& v);
bool dense_in(const ops::TensorView& v, Layout l);
// Sizes [N,C,H,W] in memory order of the layout.
Dims<4> dims_in(const ops::TensorView& v, Layout l);

// A 4-D input as a dense tensor in layout `l`: its own memory, or a packed copy.
template <class T>
class Packed4 {
 public:
  Packed4(Context& ctx, const ops::TensorView& v, Layout l, std::string_view op, std::string_view arg)
      : dims_(dims_in(v, l)) {
    if (dense_in(v, l)) {
      p_ = v.ptr<const T>();
      return;
    }
    T* buf = own_.get<T>(v.numel());
    Strided<const T> s(v, op, arg);
    const Dims<4> nchw{v.sizes[0], v.sizes[1], v.sizes[2], v.sizes[3]};
    const Eigen::array<Index, 4> perm = l == Layout::nhwc ? Eigen::array<Index, 4>{0, 2, 3, 1}
                                                          : Eigen::array<Index, 4>{0, 1, 2, 3};
    Map<T, 4>(buf, dims_).device(ctx.device) = s.expr().reshape(nchw).shuffle(perm);
    p_ = buf;
  }
  const T* data() const { return p_; }
  Map<const T, 4> map() const { return Map<const T, 4>(p_, dims_); }

 private:
  Dims<4> dims_;
  Buffer own_;
  const T* p_ = nullptr;
};

// A 4-D output written densely in layout `l`; finish() copies it into the view when
// the view is not dense in that layout.
template <class T>
class Output4 {
 public:
  Output4(const ops::TensorView& v, Layout l, std::string_view op, std::string_view arg)
      : v_(v), l_(l), op_(op), arg_(arg), dims_(dims_in(v, l)), direct_(dense_in(v, l)) {
    p_ = direct_ ? v.ptr<T>() : own_.get<T>(v.numel());
  }
  T* data() const { return p_; }
  Map<T, 4> map() const { return Map<T, 4>(p_, dims_); }
  void finish(Context& ctx) {
    if (direct_ || v_.numel() == 0) return;
    Strided<T> s(v_, op_, arg_);
    const Dims<4> nchw{v_.sizes[0], v_.sizes[1], v_.sizes[2], v_.sizes[3]};
    const Eigen::array<Index, 4> perm = l_ == Layout::nhwc ? Eigen::array<Index, 4>{0, 3, 1, 2}
                                                           : Eigen::array<Index, 4>{0, 1, 2, 3};
    s.expr().reshape(nchw).device(ctx.device) = Map<const T, 4>(p_, dims_).shuffle(perm);
  }

 private:
  const ops::TensorView& v_;
  Layout l_;
  std::string_view op_, arg_;
  Dims<4> dims_;
  bool direct_;
  Buffer own_;
  T* p_ = nullptr;
};

// A rank-1 or rank-2 view as a dense row-major tensor: its memory or a packed copy
// (in), or a buffer copied into the view by finish() (out).
template <class T, int R>
class PackedIn {
 public:
  PackedIn(Context& ctx, const ops::TensorView& v, std::string_view op, std::string_view arg) {
    for (int d = 0; d < R; ++d) dims_[d] = v.sizes[d];
    if (v.is_contiguous()) {
      p_ = v.ptr<const T>();
      return;
    }
    T* buf = own_.get<T>(v.numel());
    Strided<const T> s(v, op, arg);
    Map<T, R>(buf, dims_).device(ctx.device) = s.expr().reshape(dims_);
    p_ = buf;
  }
  Map<const T, R> map() const { return Map<const T, R>(p_, dims_); }
  const T* data() const { return p_; }

 private:
  Dims<R> dims_;
  Buffer own_;
  const T* p_ = nullptr;
};

template <class T, int R>
class PackedOut {
 public:
  PackedOut(const ops::TensorView& v, std::string_view op, std::string_view arg)
      : v_(v), op_(op), arg_(arg), direct_(v.is_contiguous()) {
    for (int d = 0; d < R; ++d) dims_[d] = v.sizes[d];
    p_ = direct_ ? v.ptr<T>() : own_.get<T>(v.numel());
  }
  Map<T, R> map() const { return Map<T, R>(p_, dims_); }
  void finish(Context& ctx) {
    if (direct_ || v_.numel() == 0) return;
    Strided<T> s(v_, op_, arg_);
    s.expr().reshape(dims_).device(ctx.device) = Map<const T, R>(p_, dims_);
  }

 private:
  const ops::TensorView& v_;
  std::string_view op_, arg_;
  bool direct_;
  Dims<R> dims_;
  Buffer own_;
  T* p_ = nullptr;
};

}  // namespace strata::backends::eigen
