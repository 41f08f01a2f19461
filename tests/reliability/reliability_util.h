#pragma once
// Helpers of the reliability tests: tensors with one defect (another device, a strided
// layout, another dtype), the CPU backends to sweep, and output comparisons.
#include <gtest/gtest.h>

#include <cctype>
#include <cstddef>
#include <string>
#include <vector>

#include "strata/backends/api/registry.h"
#include "support/compare.h"
#include "support/op_fixtures.h"

namespace strata::testing {

// Every CPU backend of this build that computes something (null computes nothing,
// so its outputs cannot be compared).
inline std::vector<backends::Backend*> cpu_backends() {
  std::vector<backends::Backend*> out;
  for (backends::Backend* b : backends::registry().for_device(DeviceType::cpu))
    if (b->name() != "null") out.push_back(b);
  return out;
}

// A tensor of `sizes` and `dt` with values from `seed`: random floats, small integers.
inline Tensor make_values(const Shape& sizes, DType dt, uint64_t seed) {
  if (is_floating(dt)) return random_tensor(sizes, dt, seed);
  Tensor r = random_tensor(sizes, DType::f64, seed, 0.0, 3.0);
  Tensor out = Tensor::empty(sizes, dt);
  copy_into(r, out);
  return out;
}

// The same sizes and dtype, claiming cuda:0 over host memory no GPU backend owns.
// Never dereferenced by a correct front end: the device check must fire first.
inline Tensor fake_device(const Tensor& t) {
  static std::vector<std::byte> buf(1 << 20);
  EXPECT_LE(t.nbytes(), buf.size());
  return Tensor::borrow(buf.data(), t.sizes(), t.dtype(), Device::cuda(0));
}

// The values of `t` in a layout with every stride doubled (a view of every other
// element of a larger buffer): not contiguous, not channels-last, same sizes.
inline Tensor noncontiguous(const Tensor& t) {
  Shape big = t.sizes();
  big.push_back(2);
  Tensor base = Tensor::empty(big, t.dtype(), t.device());
  Shape strides = contiguous_strides(big);
  Shape view_strides;
  for (int i = 0; i < t.dim(); ++i) view_strides.push_back(strides[i]);
  Tensor v = base.as_strided(t.sizes(), view_strides, 0);
  copy_into(t, v);
  return v;
}

// A copy that keeps `t`'s kind of layout, for arguments an op writes in place.
inline Tensor same_layout_copy(const Tensor& t) { return t.is_contiguous() ? t.clone() : noncontiguous(t); }

// Whether `word` occurs in `msg` delimited by characters that cannot be part of an
// identifier ('input' in "conv2d: input has 5 channels", not in "inputs").
inline bool names_word(const std::string& msg, const std::string& word) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t p = msg.find(word); p != std::string::npos; p = msg.find(word, p + 1)) {
    const bool left = p == 0 || !ident(msg[p - 1]);
    const bool right = p + word.size() == msg.size() || !ident(msg[p + word.size()]);
    if (left && right) return true;
  }
  return false;
}

inline void expect_same_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want, bool bitwise,
                                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].defined(), want[i].defined()) << what << ", output " << i;
    if (!want[i].defined()) continue;
    if (bitwise || !is_floating(want[i].dtype()))
      EXPECT_TRUE(bitwise_equal(got[i], want[i])) << what << ", output " << i;
    else
      EXPECT_TRUE(close(got[i], want[i], 1e-5)) << what << ", output " << i;
  }
}

}  // namespace strata::testing
