#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "strata/core/dtype.h"

namespace strata {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_name(DType::f16), "f16");
}

TEST(DType, F16RoundTripsExactValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /*min normal*/, 5.960464477539063e-08f /*min sub*/})
    EXPECT_EQ(from_f16(to_f16(v)), v) << v;
  EXPECT_TRUE(std::isinf(from_f16(to_f16(1e6f))));
  EXPECT_TRUE(std::isnan(from_f16(to_f16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, F16RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  EXPECT_EQ(from_f16(to_f16(1.0f + 0.00048828125f)), 1.0f);
  // 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9: goes to 1+2^-9.
  EXPECT_EQ(from_f16(to_f16(1.0f + 3 * 0.00048828125f)), 1.0f + 0.001953125f);
  EXPECT_EQ(to_f16(1.0f).bits, 0x3c00);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 1.0f / 256)), 1.0f);  // halfway: to even
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace strata
