#pragma once
// Library-free CPU loops shared by the CPU backends (header-only, no BLAS, oneDNN or
// Eigen header): strided iteration, layout tests, packing to and from contiguous
// buffers, dtype dispatch with backend-named errors, scratch memory. openblas runs
// them for everything but GEMM; onednn for the ops oneDNN has no primitive for.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

#include "strata/core/error.h"
#include "strata/ops/table/tensor_view.h"

namespace strata::backends::loops {

using ops::TensorView;

// Row-major contiguous (size-1 dims ignored); inline, as it guards every hot loop.
inline bool contiguous(const ops::TensorView& v) {
  int64_t expect = 1;
  for (int d = v.dim() - 1; d >= 0; --d) {
    if (v.sizes[d] != 1 && v.strides[d] != expect) return false;
    expect *= v.sizes[d];
  }
  return true;
}

// Whether the view covers numel() elements densely from data, in some dimension
// order (NCHW, NHWC, any permutation), without overlap or negative strides.
inline bool is_dense(const ops::TensorView& v) {
  const int nd = v.dim();
  std::array<int, kMaxDims> order{};
  for (int i = 0; i < nd; ++i) {  // insertion sort by stride: at most kMaxDims entries
    int j = i;
    for (; j > 0 && v.strides[order[j - 1]] > v.strides[i]; --j) order[j] = order[j - 1];
    order[j] = i;
  }
  int64_t expect = 1;
  for (int i = 0; i < nd; ++i) {
    const int d = order[i];
    if (v.sizes[d] == 1) continue;
    if (v.strides[d] != expect) return false;
    expect *= v.sizes[d];
  }
  return true;
}

// Same sizes and the same strides on every dimension that has more than one element.
inline bool same_layout(const ops::TensorView& a, const ops::TensorView& b) {
  if (!(a.sizes == b.sizes)) return false;
  for (int d = 0; d < a.dim(); ++d)
    if (a.sizes[d] != 1 && a.strides[d] != b.strides[d]) return false;
  return true;
}

namespace detail {
template <class Fn, size_t... I, size_t N>
inline void call_row(Fn& fn, int64_t k0, int64_t len, const std::array<int64_t, N>& base,
                     const std::array<int64_t, N>& step, std::index_sequence<I...>) {
  for (int64_t i = 0; i < len; ++i) fn(k0 + i, (base[I] + i * step[I])...);
}
}  // namespace detail

// Calls fn(k, off_0, off_1, ...) for every element k in row-major order of the first
// view's sizes, with the element offset in each view. All views have the same sizes.
template <class Fn, class... Views>
void for_each_element(Fn&& fn, const ops::TensorView& first, const Views&... rest) {
  constexpr size_t N = 1 + sizeof...(Views);
  const int64_t n = first.numel();
  if (n == 0) return;
  if (contiguous(first) && (contiguous(rest) && ...)) {
    for (int64_t i = 0; i < n; ++i) fn(i, i, ((void)rest, i)...);
    return;
  }
  const std::array<const ops::TensorView*, N> vs{&first, &rest...};
  const Shape& s = first.sizes;
  const int nd = s.size();
  if (nd == 0) {
    fn(int64_t{0}, int64_t{0}, ((void)rest, int64_t{0})...);
    return;
  }
  const int64_t inner = s[nd - 1];
  std::array<int64_t, N> step{};
  for (size_t j = 0; j < N; ++j) step[j] = vs[j]->strides[nd - 1];
  std::array<int64_t, kMaxDims> idx{};
  for (int64_t k = 0; k < n; k += inner) {
    std::array<int64_t, N> base{};
    for (size_t j = 0; j < N; ++j)
      for (int d = 0; d < nd - 1; ++d) base[j] += idx[d] * vs[j]->strides[d];
    detail::call_row(fn, k, inner, base, step, std::make_index_sequence<N>{});
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

// Like for_each_element when the visiting order does not matter: views sharing one
// dense layout (e.g. all channels-last) are walked as flat arrays. The index k passed
// to fn is then a memory index, not a logical one.
template <class Fn, class... Views>
void for_each_unordered(Fn&& fn, const ops::TensorView& first, const Views&... rest) {
  if ((contiguous(first) && (contiguous(rest) && ...)) || (is_dense(first) && (same_layout(first, rest) && ...))) {
    const int64_t n = first.numel();
    for (int64_t i = 0; i < n; ++i) fn(i, i, ((void)rest, i)...);
    return;
  }
  for_each_element(fn, first, rest...);
}

// Raises the error every backend gives for a dtype it does not implement.
[[noreturn]] inline void unsupported_dtype(std::string_view backend, std::string_view op, DType dt,
                                           std::string_view supported) {
  STRATA_FAIL(backend, ": ", op, " does not support dtype ", dtype_name(dt), " (supported: ", supported, ")");
}

// Calls f(T{}) with T = float or double for `dt`.
template <class F>
decltype(auto) visit_float(std::string_view backend, std::string_view op, DType dt, F&& f) {
  if (dt == DType::f32) return f(float{});
  if (dt == DType::f64) return f(double{});
  unsupported_dtype(backend, op, dt, "f32, f64");
}

// 64-byte aligned, uninitialised storage that only grows: workspaces reused across
// calls (im2col columns) and one-off packing buffers.
class Scratch {
 public:
  template <class T>
  T* get(int64_t count) {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T);
    if (bytes > cap_) {
      const size_t rounded = (bytes + 63) / 64 * 64;
      void* p = std::aligned_alloc(64, rounded);
      STRATA_CHECK(p != nullptr, "cpu backend: out of memory allocating ", rounded, " bytes of scratch");
      buf_.reset(static_cast<std::byte*>(p));
      cap_ = rounded;
    }
    return reinterpret_cast<T*>(buf_.get());
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> buf_;
  size_t cap_ = 0;
};

// Copies a view of any strides into a row-major contiguous buffer, and back.
template <class T>
void gather_contiguous(const ops::TensorView& src, T* dst) {
  const T* s = src.ptr<T>();
  if (contiguous(src)) {
    std::memcpy(dst, s, static_cast<size_t>(src.numel()) * sizeof(T));
    return;
  }
  for_each_element([&](int64_t k, int64_t o) { dst[k] = s[o]; }, src);
}
template <class T>
void scatter_contiguous(const T* src, const ops::TensorView& dst) {
  T* d = dst.ptr<T>();
  if (contiguous(dst)) {
    std::memcpy(d, src, static_cast<size_t>(dst.numel()) * sizeof(T));
    return;
  }
  for_each_element([&](int64_t k, int64_t o) { d[o] = src[k]; }, dst);
}

// A row-major contiguous pointer to an input view: the view's own memory when it is
// already contiguous, else a packed copy.
template <class T>
class ContiguousIn {
 public:
  explicit ContiguousIn(const ops::TensorView& v) {
    if (contiguous(v)) {
      p_ = v.ptr<const T>();
    } else {
      T* buf = scratch_.get<T>(v.numel());
      gather_contiguous(v, buf);
      p_ = buf;
    }
  }
  const T* get() const { return p_; }

 private:
  Scratch scratch_;
  const T* p_ = nullptr;
};

// A row-major contiguous pointer to an output view; write through get(), then call
// finish() to scatter into the view when it is not contiguous.
template <class T>
class ContiguousOut {
 public:
  explicit ContiguousOut(const ops::TensorView& v) : v_(v) {
    direct_ = contiguous(v);
    p_ = direct_ ? v.ptr<T>() : scratch_.get<T>(v.numel());
  }
  T* get() const { return p_; }
  void finish() {
    if (!direct_) scatter_contiguous(p_, v_);
  }

 private:
  const ops::TensorView& v_;
  Scratch scratch_;
  T* p_ = nullptr;
  bool direct_ = true;
};

// The call hook of the shared members' macros (STRATA_CPU_*_MEMBERS_OBSERVED): a backend that
// reports its calls to an observer (onednn's, for codegen/) passes its own; the others this one.
template <class Op, class Args>
inline void unobserved(Op, const Args&) {}

}  // namespace strata::backends::loops
