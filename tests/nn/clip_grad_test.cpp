// nn::clip_grad_norm_: gradients scaled to a global norm as torch.nn.utils.clip_grad_norm_ does,
// in place, and left alone below it.
#include <gtest/gtest.h>

#include <cmath>

#include "strata/nn/clip_grad.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

std::vector<Tensor> params_with_grads() {
  Tensor a = Tensor::from_vector<float>({0.f, 0.f}, {2}), b = Tensor::from_vector<float>({0.f}, {1});
  a.set_grad(Tensor::from_vector<float>({3.f, 0.f}, {2}));
  b.set_grad(Tensor::from_vector<float>({4.f}, {1}));
  return {a, b, Tensor::from_vector<float>({1.f}, {1})};  // the last has no gradient: skipped
}

TEST(ClipGradNorm, ScalesEveryGradientInPlaceToTheNorm) {
  std::vector<Tensor> p = params_with_grads();
  const Tensor a_grad = p[0].grad();
  const Tensor norm = nn::clip_grad_norm_(p, 1.0);
  EXPECT_FLOAT_EQ(norm.item(), 5.f);
  const float coef = static_cast<float>(1.0 / (5.0 + 1e-6));
  EXPECT_FLOAT_EQ(a_grad.to_vector<float>()[0], 3.f * coef);  // the same buffer, written
  EXPECT_FLOAT_EQ(p[1].grad().to_vector<float>()[0], 4.f * coef);
  EXPECT_FALSE(p[2].grad().defined());
}

TEST(ClipGradNorm, BelowTheNormNothingChanges) {
  std::vector<Tensor> p = params_with_grads();
  EXPECT_FLOAT_EQ(nn::clip_grad_norm_(p, 10.0).item(), 5.f);
  EXPECT_EQ(p[0].grad().to_vector<float>(), (std::vector<float>{3.f, 0.f}));
  EXPECT_EQ(p[1].grad().to_vector<float>(), (std::vector<float>{4.f}));
}

TEST(ClipGradNorm, NoGradientAndBadNorms) {
  const std::vector<Tensor> none{Tensor::from_vector<float>({1.f}, {1})};
  EXPECT_FALSE(nn::clip_grad_norm_(none, 1.0).defined());
  EXPECT_STRATA_ERROR(nn::clip_grad_norm_(none, 0.0), "clip_grad_norm_", "max_norm must be finite and > 0", "0");
  EXPECT_STRATA_ERROR(nn::clip_grad_norm_(none, std::nan("")), "max_norm", "nan");
}

}  // namespace
}  // namespace strata::testing
