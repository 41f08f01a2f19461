// A run whose model stops being finite ends with an error naming where and why: at
// the first non-finite training loss, and at an evaluation whose test loss is not
// finite (the last update of an epoch can overflow the weights after a finite loss).
#include <gtest/gtest.h>

#include <cmath>

#include "examples/train/trainer.h"
#include "support/expect_error.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

void poison_weights(nn::Model& m) {
  for (auto& [name, t] : m.module().named_parameters()) {
    std::vector<float> v = t.to_vector<float>();
    for (float& x : v) x = std::nanf("");
    copy_into(Tensor::from_vector(v, t.sizes()), t);
  }
}

train::TrainOptions options() {
  train::TrainOptions o =
      tiny_options(write_synthetic_idx(temp_dir("data"), 64, 32, 5).string(), "reference", "direct");
  o.epochs = 1;
  o.batch_size = 32;
  return o;
}

TEST(TrainDivergence, ANonFiniteTestLossEndsTheRun) {
  train::Trainer t(train::resolve(options()), nullptr, nullptr);
  EXPECT_TRUE(std::isfinite(t.evaluate().loss));
  poison_weights(t.model());
  EXPECT_STRATA_ERROR(t.evaluate(), "training diverged", "evaluation at epoch 1, step 0", "test loss nan",
                      "no longer finite", "smaller --lr");
}

TEST(TrainDivergence, ANonFiniteTrainingLossEndsTheRunAtThatStep) {
  train::Trainer t(train::resolve(options()), nullptr, nullptr);
  poison_weights(t.model());
  EXPECT_STRATA_ERROR(t.run(), "training diverged: loss is nan at step 1 (epoch 1, lr 0.05)", "smaller --lr");
}

TEST(TrainDivergence, TheNullBackendComputesNothingAndIsNotChecked) {
  train::TrainOptions o = options();
  o.backend = "null";
  train::Trainer t(train::resolve(o), nullptr, nullptr);
  EXPECT_NO_THROW(t.run());
}

}  // namespace
}  // namespace strata::testing
