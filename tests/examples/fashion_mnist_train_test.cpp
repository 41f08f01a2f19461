// The main command in miniature: LeNet trained for a fraction of an epoch on the real
// Fashion-MNIST files (Debian's dataset-fashion-mnist) with the best CPU backend of
// the build must be far above chance (10 %) on 1000 test images.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "strata/data/idx.h"
#include "examples/train/trainer.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

TEST(TrainFashionMnist, FractionOfAnEpochIsFarAboveChance) {
  if (!std::filesystem::is_directory(data::kDebianFashionMnistDir))
    GTEST_SKIP() << data::kDebianFashionMnistDir << " is absent (install dataset-fashion-mnist)";
  train::TrainOptions o;  // the main command's defaults: LeNet, best CPU backend, direct dispatch
  o.train_limit = 4096;   // 64 steps of 64: about a fifteenth of an epoch
  o.test_limit = 1000;
  o.epochs = 1;
  o.progress = false;
  const train::RunConfig cfg = train::resolve(o);
  const auto t0 = std::chrono::steady_clock::now();
  train::Trainer t(cfg, stdout, nullptr);
  const train::RunResult r = t.run();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.epochs.size(), 1u);
  const train::EpochMetrics& m = r.epochs[0];
  std::printf("%s: %lld steps, test accuracy %.2f%% on %lld images, %.1f s\n", cfg.o.backend.c_str(),
              static_cast<long long>(r.steps), 100.0 * m.test_accuracy, static_cast<long long>(m.test_images), secs);
  EXPECT_EQ(m.test_images, 1000);
  EXPECT_GT(m.test_accuracy, 0.60);
  EXPECT_LT(m.test_loss, 1.2);
}

}  // namespace
}  // namespace strata::testing
