#include "strata/core/shape.h"

#include "strata/core/error.h"

namespace strata {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t v : dims) push_back(v);
}

void Shape::push_back(int64_t v) {
  STRATA_CHECK(n_ < kMaxDims, "Shape: rank above the maximum of ", kMaxDims);
  d_[n_++] = v;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < n_; ++i) n *= d_[i];
  return n;
}

int64_t Shape::checked_numel() const {
  int64_t n = 1;
  for (int i = 0; i < n_; ++i)
    if (d_[i] < 0 || __builtin_mul_overflow(n, d_[i], &n)) return -1;
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ",";
    s += std::to_string(d_[i]);
  }
  return s + "]";
}

Shape contiguous_strides(const Shape& sizes) {
  Shape st = sizes;
  int64_t acc = 1;
  for (int i = sizes.size() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return st;
}

Shape channels_last_strides(const Shape& s) {
  STRATA_CHECK(s.size() == 4, "channels_last_strides: needs rank 4, got ", s.str());
  const int64_t c = s[1], h = s[2], w = s[3];
  return Shape{h * w * c, 1, w * c, c};
}

bool is_contiguous_layout(const Shape& s, const Shape& st) {
  int64_t acc = 1;
  for (int i = s.size() - 1; i >= 0; --i) {
    if (s[i] != 1 && st[i] != acc) return false;
    acc *= s[i];
  }
  return true;
}

bool is_channels_last_layout(const Shape& s, const Shape& st) {
  if (s.size() != 4) return false;
  const Shape want = channels_last_strides(s);
  for (int i = 0; i < 4; ++i)
    if (s[i] != 1 && st[i] != want[i]) return false;
  return true;
}

std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  Shape out = new_sizes;
  if (sizes.numel() == 0 || sizes.empty()) return contiguous_strides(new_sizes);
  // Walk x's dims from the last, in chunks of dims contiguous with each other; each chunk
  // must be covered exactly by a run of new dims, which then step through it.
  int view_d = new_sizes.size() - 1;
  int64_t chunk_base = strides[sizes.size() - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = sizes.size() - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace strata
