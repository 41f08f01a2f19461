#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <set>

#include "strata/core/factories.h"
#include "support/expect_error.h"

namespace strata {
namespace {

TEST(Generator, UniformIsTheTop53BitsOfMt19937_64) {
  Generator g(7);
  std::mt19937_64 ref(7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(g.uniform(), static_cast<double>(ref() >> 11) * 0x1.0p-53);
  EXPECT_EQ(g.initial_seed(), 7u);
}

TEST(Generator, NormalsComeInBoxMullerPairs) {
  Generator g(3), u(3);
  for (int i = 0; i < 10; ++i) {
    const double u1 = 1.0 - u.uniform(), u2 = u.uniform();
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * std::numbers::pi * u2;
    EXPECT_EQ(g.normal(), r * std::cos(a));
    EXPECT_EQ(g.normal(), r * std::sin(a));
  }
}

TEST(Generator, ManualSeedRestartsTheSequenceAndDropsThePendingNormal) {
  Generator g(5);
  const double first = g.normal();
  g.manual_seed(5);
  EXPECT_EQ(g.normal(), first);
  g.normal();  // leaves the sine value pending
  g.manual_seed(5);
  EXPECT_EQ(g.normal(), first);
}

TEST(Generator, IntegersCoverTheHalfOpenRange) {
  Generator g(1);
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = g.integer(-3, 4);
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_EQ(g.integer(INT64_MIN, INT64_MIN + 1), INT64_MIN);
  EXPECT_STRATA_ERROR(g.integer(4, 4), "low < high");
}

TEST(Factories, ConstantsHaveTheirShapeDtypeDeviceAndValue) {
  const Tensor z = zeros({2, 3});
  EXPECT_EQ(z.sizes(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_TRUE(z.device().is_cpu());
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(ones({4}, DType::i64).to_vector<int64_t>(), std::vector<int64_t>(4, 1));
  EXPECT_EQ(full({2, 2}, -2.5, DType::f64).to_vector<double>(), std::vector<double>(4, -2.5));
  EXPECT_EQ(full({3}, 1.5, DType::bf16).to_vector<float>(), std::vector<float>(3, 1.5f));
  EXPECT_EQ(full({}, 7, DType::u8).item(), 7.0);
  EXPECT_EQ(zeros({0, 5}).numel(), 0);
  EXPECT_TRUE(std::isinf(full({1}, INFINITY).item()));
}

TEST(Factories, BadArgumentsNameTheFactoryAndTheArgument) {
  EXPECT_STRATA_ERROR(zeros({2, -1}), "full", "negative size", "[2,-1]");
  EXPECT_STRATA_ERROR(full({2}, 2.5, DType::i64), "full", "2.5", "i64");
  EXPECT_STRATA_ERROR(full({2}, 300, DType::u8), "full", "300", "u8");
  EXPECT_STRATA_ERROR(full({2}, 1e6, DType::f16), "full", "overflows f16");
  Generator g;
  EXPECT_STRATA_ERROR(rand({2}, g, DType::i64), "rand", "floating", "i64");
  EXPECT_STRATA_ERROR(randn({2}, g, DType::u8), "randn", "floating", "u8");
  EXPECT_STRATA_ERROR(randint(3, 3, {2}, g), "randint", "low < high", "low 3, high 3");
  EXPECT_STRATA_ERROR(randint(0, 300, {2}, g, DType::u8), "randint", "u8", "[0, 300)");
  EXPECT_STRATA_ERROR(randint(0, (1 << 24) + 2, {2}, g, DType::f32), "randint", "f32");
  EXPECT_STRATA_ERROR(arange(0, 10, 0), "arange", "step must be nonzero");
  EXPECT_STRATA_ERROR(arange(0, 10, -1), "arange", "step -1", "start 0", "end 10");
  EXPECT_STRATA_ERROR(arange(0.0, INFINITY, 1.0), "arange", "finite");
  EXPECT_STRATA_ERROR(arange(0.5, 3.0, 1.0, DType::i64), "arange", "i64", "integer start");
  EXPECT_STRATA_ERROR(arange(0, 300, 1, DType::u8), "arange", "u8", "0 to 299");
  EXPECT_STRATA_ERROR(from_vector({1.f, 2.f, 3.f}, Shape{2, 2}), "from_vector", "3 values", "[2,2]");
}

TEST(Factories, RandomFactoriesAreReproducibleFromTheSeed) {
  Generator a(11), b(11), c(12);
  const auto va = randn({64}, a).to_vector<float>();
  EXPECT_EQ(va, randn({64}, b).to_vector<float>());
  EXPECT_NE(va, randn({64}, c).to_vector<float>());
  // The default generator: manual_seed restarts it, as torch::manual_seed does.
  manual_seed(9);
  const auto d1 = rand({32}).to_vector<float>();
  const auto d2 = rand({32}).to_vector<float>();
  manual_seed(9);
  EXPECT_EQ(rand({32}).to_vector<float>(), d1);
  EXPECT_NE(d1, d2);
  Generator same(9);
  EXPECT_EQ(rand({32}, same).to_vector<float>(), d1);
}

TEST(Factories, RandIsInTheUnitIntervalAndUniform) {
  Generator g(2);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const auto v = rand({20000}, g, dt).to_vector<double>();
    double mean = 0;
    for (double x : v) {
      ASSERT_GE(x, 0.0) << dtype_name(dt);
      ASSERT_LT(x, 1.0) << dtype_name(dt);
      mean += x / static_cast<double>(v.size());
    }
    EXPECT_NEAR(mean, 0.5, 0.01) << dtype_name(dt);
  }
  // f32 values sit on the 2^-24 grid: exact in the dtype, never rounded up to 1.
  for (float x : rand({1000}, g).to_vector<float>()) EXPECT_EQ(std::ldexp(x, 24), std::floor(std::ldexp(x, 24)));
}

TEST(Factories, RandnHasZeroMeanAndUnitVariance) {
  Generator g(4);
  const auto v = randn({40000}, g, DType::f64).to_vector<double>();
  double mean = 0, sq = 0;
  for (double x : v) mean += x, sq += x * x;
  mean /= static_cast<double>(v.size());
  const double var = sq / static_cast<double>(v.size()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.03);
}

TEST(Factories, RandintDrawsEveryValueOfTheRangeAndNoOther) {
  Generator g(6);
  const Tensor t = randint(-2, 3, {500}, g);
  EXPECT_EQ(t.dtype(), DType::i64);
  std::set<int64_t> seen;
  for (int64_t v : t.to_vector<int64_t>()) {
    ASSERT_GE(v, -2);
    ASSERT_LT(v, 3);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 5u);
  for (double v : randint(0, 10, {50}, g, DType::f32).to_vector<double>()) EXPECT_EQ(v, std::floor(v));
}

TEST(Factories, ArangeFollowsPyTorchsDtypeRuleAndLength) {
  const Tensor i = arange(0, 10, 3);
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(arange(4).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(arange(5, 1, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  const Tensor f = arange(0, 1, 0.25);
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0.f, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(0.0, 1.0, 0.3).numel(), 4);  // ceil(1 / 0.3)
  EXPECT_EQ(arange(0, 3, 1, DType::f64).dtype(), DType::f64);
}

TEST(Factories, FromVectorTakesAShape) {
  const Tensor t = from_vector({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, Shape{2, 3});
  EXPECT_EQ(t.sizes(), (Shape{2, 3}));
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const Tensor v = from_vector(std::vector<int64_t>{4, 5});
  EXPECT_EQ(v.sizes(), (Shape{2}));
  EXPECT_EQ(v.dtype(), DType::i64);
}

}  // namespace
}  // namespace strata
