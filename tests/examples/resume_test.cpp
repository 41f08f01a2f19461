// Exact resume: a run interrupted after a checkpoint and resumed from it ends with
// bitwise the same weights, optimizer state and epoch metrics as an uninterrupted
// run (reference backend, keras LeNet with its two dropouts, synthetic IDX data,
// augmentation on so the per-image random transforms are covered too).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "examples/train/trainer.h"
#include "strata/nn/safetensors.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

struct Outcome {
  train::RunResult result;
  nn::StateDict model, optimizer;
};

Outcome run(const train::TrainOptions& o) {
  train::Trainer t(train::resolve(o), nullptr, nullptr);
  Outcome out;
  out.result = t.run();
  for (auto& [n, v] : t.model().state_dict()) out.model.emplace_back(n, v.clone());
  for (auto& [n, v] : t.optimizer().state_dict()) out.optimizer.emplace_back(n, v.clone());
  return out;
}

void expect_same_state(const nn::StateDict& a, const nn::StateDict& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first) << what;
    EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second)) << what << ": " << a[i].first;
  }
}

void expect_same_metrics(const train::EpochMetrics& a, const train::EpochMetrics& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.train_loss, b.train_loss) << "epoch " << a.epoch;
  EXPECT_EQ(a.train_accuracy, b.train_accuracy) << "epoch " << a.epoch;
  EXPECT_EQ(a.test_loss, b.test_loss) << "epoch " << a.epoch;
  EXPECT_EQ(a.test_accuracy, b.test_accuracy) << "epoch " << a.epoch;
  EXPECT_EQ(a.train_images, b.train_images) << "epoch " << a.epoch;
  EXPECT_EQ(a.lr, b.lr) << "epoch " << a.epoch;
}

struct ResumeCase {
  const char* dispatch;
  const char* optimizer;
  int64_t checkpoint_every;  // 0: only at epoch ends
  int64_t stop_after;
};

void PrintTo(const ResumeCase& c, std::ostream* os) {
  *os << c.dispatch << " " << c.optimizer << ", checkpoint every " << c.checkpoint_every << ", stop after "
      << c.stop_after;
}

class TrainResume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(TrainResume, ContinuesExactlyAsAnUninterruptedRun) {
  const ResumeCase c = GetParam();
  const auto dir = temp_dir("resume");
  write_synthetic_idx(dir / "data", 72, 40, 11);
  train::TrainOptions o = tiny_options((dir / "data").string(), "reference", c.dispatch);
  o.optimizer = c.optimizer;
  o.lr = std::string(c.optimizer) == "sgd" ? 0.05 : 0.003;
  o.epochs = 2;
  o.batch_size = 16;  // 72 images: 5 steps per epoch, the last one of 8 images
  o.eval_batch_size = 16;
  o.augment = 1;
  o.seed = 5;

  const Outcome full = run(o);
  ASSERT_EQ(full.result.epochs.size(), 2u);
  ASSERT_EQ(full.result.steps, 10);

  train::TrainOptions first = o;
  first.checkpoint = (dir / "ck" / "run.safetensors").string();
  first.checkpoint_every = c.checkpoint_every;
  first.stop_after_steps = c.stop_after;
  const Outcome stopped = run(first);
  ASSERT_TRUE(stopped.result.interrupted);
  ASSERT_TRUE(std::filesystem::exists(first.checkpoint));

  train::TrainOptions second = o;
  second.resume = first.checkpoint;
  const Outcome resumed = run(second);
  ASSERT_FALSE(resumed.result.interrupted);
  EXPECT_EQ(resumed.result.steps, 10);
  expect_same_state(full.model, resumed.model, "model");
  expect_same_state(full.optimizer, resumed.optimizer, "optimizer");
  // Every epoch the resumed run finished has the uninterrupted run's metrics.
  ASSERT_GE(resumed.result.epochs.size(), 1u);
  for (const auto& m : resumed.result.epochs) expect_same_metrics(full.result.epochs[static_cast<size_t>(m.epoch - 1)], m);
  // The metrics lines of the resumed run carry the interrupted run's id; another run has its own.
  const std::string run_id = nn::safetensors::load(first.checkpoint).metadata.at("strata.train.run_id");
  for (const auto& m : resumed.result.epochs) EXPECT_EQ(m.run_id, run_id);
  EXPECT_NE(full.result.epochs.front().run_id, run_id);
  // A different stop point proves the comparison is not vacuous: the interrupted run
  // itself did not reach the final weights.
  EXPECT_FALSE(bitwise_equal(full.model.front().second, stopped.model.front().second));
}

INSTANTIATE_TEST_SUITE_P(Cases, TrainResume,
                         ::testing::Values(ResumeCase{"direct", "sgd", 3, 4},      // mid-epoch 1, steps 4 redone
                                           ResumeCase{"virtual", "adam", 0, 7},    // saved at the stop (step 7)
                                           ResumeCase{"direct", "adam", 0, 5},     // stop at epoch 1's end (step 5)
                                           ResumeCase{"static", "adamw", 4, 9},    // mid-epoch 2 (step 8)
                                           ResumeCase{"direct", "rmsprop", 3, 7},  // mid-epoch 2 (step 6)
                                           ResumeCase{"static", "adagrad", 4, 9}), // mid-epoch 2 (step 8)
                         [](const auto& info) {
                           return std::string(info.param.dispatch) + "_" + info.param.optimizer + "_stop" +
                                  std::to_string(info.param.stop_after);
                         });

TEST(TrainResumeErrors, ACheckpointOfAnotherModelIsRefusedWithTheReason) {
  const auto dir = temp_dir("mismatch");
  write_synthetic_idx(dir / "data", 32, 16, 3);
  train::TrainOptions o = tiny_options((dir / "data").string(), "reference", "direct");
  o.epochs = 1;
  o.batch_size = 16;
  o.checkpoint = (dir / "run.safetensors").string();
  run(o);
  train::TrainOptions other = o;
  other.checkpoint.clear();
  other.resume = o.checkpoint;
  other.lenet_variant = "tensorflow";
  EXPECT_STRATA_ERROR(train::Trainer(train::resolve(other), nullptr, nullptr), "resume: ",
                      "pass the options of the original run");
  // The checkpoint carries what strata_infer needs to rebuild the model.
  const auto meta = nn::safetensors::load(o.checkpoint).metadata;
  EXPECT_EQ(meta.at("strata.train.model"), "lenet");
  EXPECT_EQ(meta.at("strata.train.lenet_variant"), "keras");
  EXPECT_EQ(meta.at("strata.train.dataset"), "fashion-mnist");
  EXPECT_EQ(meta.at("strata.train.epoch"), "1");
  EXPECT_EQ(meta.at("strata.step"), "2");
}

}  // namespace
}  // namespace strata::testing
