#pragma once
// A small fixed-capacity list of dimensions: building one never touches the heap,
// which matters because every op builds several (host overhead is what we measure).
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace strata {

inline constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <class It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  void push_back(int64_t v);
  int64_t numel() const;  // product; 1 for rank 0
  // The product, or -1 when a size is negative or a partial product (in dimension
  // order, as numel() forms it) overflows int64. Tensors only ever hold shapes for
  // which this is >= 0, so numel() never overflows.
  int64_t checked_numel() const;
  std::string str() const;  // "[8,3,32,32]"

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }

 private:
  std::array<int64_t, kMaxDims> d_{};
  int n_ = 0;
};

// Row-major (C-contiguous) strides for `sizes`.
Shape contiguous_strides(const Shape& sizes);
// Whether `strides` lay `sizes` out densely in row-major / channels-last order
// (strides of size-1 dims are ignored, as PyTorch does).
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);
bool is_channels_last_layout(const Shape& sizes, const Shape& strides);
// Channels-last strides for a rank-4 NCHW-ordered `sizes` (memory order N,H,W,C).
Shape channels_last_strides(const Shape& sizes);
// The strides that view memory laid out as (sizes, strides) with new_sizes (same element
// count), or nullopt when no strides can (the data must then be copied): PyTorch's rule for
// view(), which merges and splits only dims that are contiguous with each other.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes);

}  // namespace strata
