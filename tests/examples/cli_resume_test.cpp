// Hostile checkpoints given to --resume (and to strata_infer): a valid file whose
// metadata is not what strata_train wrote. Every field is checked for its type, its
// range and its consistency with the others before a tensor is loaded; the error names
// the file, the field and its value.
#include <filesystem>

#include "cli_fixture.h"
#include "strata/nn/safetensors.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

struct MetaCase {
  const char* key;
  const char* value;  // nullptr: the key is removed
  const char* says;   // what the message must add
};

// A copy of `source` with one metadata entry changed.
fs::path with_meta(const fs::path& source, const fs::path& dir, const MetaCase& c) {
  nn::safetensors::Contents ck = nn::safetensors::load(source.string());
  if (c.value)
    ck.metadata[c.key] = c.value;
  else
    ck.metadata.erase(c.key);
  const fs::path p = dir / "corrupt.safetensors";
  nn::safetensors::save(p.string(), ck.tensors, ck.metadata);
  return p;
}

void expect_refused(HostileCli& t, const fs::path& source, const std::vector<MetaCase>& cases,
                    const std::vector<std::string>& extra) {
  for (const MetaCase& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + (c.value ? c.value : "(absent)"));
    const fs::path p = with_meta(source, t.dir(), c);
    std::vector<std::string> args = {"--resume", p.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProgramResult r = t.train(args);
    const std::string field = std::string("'") + c.key + "'";
    EXPECT_TRUE(runtime_error(r, {p.c_str(), field.c_str(), c.value ? c.value : "lacks metadata", c.says}));
    EXPECT_FALSE(mentions(r.out, {"resumed from"})) << r.out;
  }
}

TEST_F(HostileCli, ResumeMetadataOutOfRangeOrOfTheWrongTypeIsRefusedNamingTheField) {
  // The trained checkpoint stands at the end of its only epoch (epoch 1 of 1, batch 0).
  expect_refused(*this, checkpoint(),
                 {{"strata.train.epoch", "99999999999999999999", "is not an integer in [0, 1]"},
                  {"strata.train.epoch", "2", "is not an integer in [0, 1]"},
                  {"strata.train.epoch", "one", "is not an integer"},
                  {"strata.train.epoch", nullptr, "strata_train"},
                  {"strata.step", "-5", "is not an integer in [1, 9007199254740992]"},
                  {"strata.step", "1.5", "is not an integer"},
                  {"strata.optimizer_steps", "3", "is not an integer in [0, 2]"},
                  {"strata.train.epochs", "0", "is not an integer in [1, 100000]"},
                  {"strata.train.batch_size", "-32", "is not an integer in [1, 1048576]"},
                  {"strata.train.train_images", "abc", "is not an integer"},
                  {"strata.train.batch", "1", "is not an integer in [0, 0]"},
                  {"strata.train.seen", "5", "is not an integer in [0, 0]"},
                  {"strata.train.loss_sum", "nan", "is not a finite number"},
                  {"strata.train.loss_sum", "0x1p+3", "is not 0 although no image of the epoch was seen"},
                  {"strata.train.seed", "-1", "is not an integer in [0, 18446744073709551615]"},
                  {"strata.train.dropout.dropout1", "-3", "is not an integer"},
                  {"strata.train.task", "regression", "is not one of classification, multilabel"},
                  {"strata.train.zero_last_bn_gamma", "2", "is not one of 0, 1"},
                  {"strata.train.base_channels", "0", "is not an integer in [1, 4096]"}},
                 {"--epochs", "2"});
}

TEST_F(HostileCli, ResumeMetadataInconsistentWithItselfOrItsDatasetIsRefused) {
  // A checkpoint in the middle of an epoch: after step 1 of 2.
  const fs::path mid = dir() / "mid.safetensors";
  ASSERT_TRUE(succeeded(train({"--epochs", "2", "--checkpoint", mid.string(), "--checkpoint-every", "1",
                               "--stop-after-steps", "1"})));
  ASSERT_TRUE(succeeded(train({"--epochs", "2", "--resume", mid.string()}))) << "the valid file resumes";
  expect_refused(*this, mid,
                 {{"strata.train.batch", "2", "is not an integer in [0, 1]"},  // its epochs have 2 batches
                  {"strata.train.seen", "0", "is not an integer in [1, 1099511627776]"},
                  {"strata.train.correct", "33", "is not an integer in [0, 32]"},  // more right than seen
                  {"strata.step", "0", "is not an integer in [1, "},             // a batch without a step
                  {"strata.train.in_channels", "3", "disagrees with dataset 'fashion-mnist' (1 channels)"},
                  {"strata.train.num_classes", "20", "disagrees with dataset 'fashion-mnist' (10 classes)"},
                  {"strata.train.dataset", "imagenet", "unknown dataset 'imagenet'"},
                  {"strata.train.model", "vgg16", "is not one of lenet, resnet18, resnet50"}},
                 {"--epochs", "2"});
  // Consistent in itself, not with this run: a batch past this run's epoch.
  const ProgramResult r = train({"--epochs", "2", "--resume", mid.string(), "--batch-size", "64"});
  EXPECT_TRUE(runtime_error(r, {mid.c_str(), "stopped after batch 1", "epochs have 1 batches",
                                "--batch-size (32)"}));
}

TEST_F(HostileCli, ResumingAnotherModelNamesTheOptionsThatDifferAndBothValues) {
  // The checkpoint holds keras LeNet.
  ProgramResult r = train({"--resume", checkpoint().string(), "--epochs", "2", "--lenet-variant", "tensorflow"});
  EXPECT_TRUE(runtime_error(r, {checkpoint().c_str(), "--lenet-variant keras (this run: tensorflow)",
                                "pass the options of the original run (--lenet-variant keras)"}));
  EXPECT_FALSE(mentions(r.err, {"--width"}) || mentions(r.err, {"--model"})) << "names what does not differ: " << r.err;
  r = train({"--resume", checkpoint().string(), "--epochs", "2", "--model", "resnet18", "--width", "4"});
  EXPECT_TRUE(runtime_error(r, {"--model lenet (this run: resnet18)", "(--model lenet)"}));
  EXPECT_FALSE(mentions(r.err, {"--lenet-variant"}) || mentions(r.err, {"--width"})) << r.err;
}

// 64 images in batches of 32: two steps per epoch.
TEST_F(HostileCli, StopAfterStepsCountsThisRunsStepsAndLeavesACheckpointAtTheStop) {
  const fs::path ck = dir() / "run.safetensors";
  const Args run{"--epochs", "4", "--checkpoint", ck.string()};
  auto with = [&](Args extra) {
    Args a = run;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ProgramResult r = train(with({"--stop-after-steps", "3"}));
  ASSERT_TRUE(succeeded(r));
  const std::string at_stop = "checkpoint: " + ck.string() + " (epoch 2, batch 1, step 3), written at the stop";
  EXPECT_TRUE(mentions(r.out, {at_stop.c_str(), "stopped after 3 steps of this run"})) << r.out;
  // Resumed at step 3, two more steps: the rest of epoch 2 (evaluated and saved) and one of epoch 3.
  r = train(with({"--resume", ck.string(), "--stop-after-steps", "2"}));
  ASSERT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.out, {"resumed from", "step 3\n", "epoch 2/4:", "(epoch 3, batch 1, step 5), written at the "
                               "stop", "stopped after 2 steps of this run (--stop-after-steps; step 5 of the whole "
                               "run)"}))
      << r.out;
  EXPECT_EQ(nn::safetensors::load(ck.string()).metadata.at("strata.step"), "5");
  // A stop on an epoch's last step finishes the epoch first: its evaluation, then its checkpoint.
  r = train(with({"--resume", ck.string(), "--stop-after-steps", "1"}));
  ASSERT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.out, {"epoch 3/4:", ("checkpoint: " + ck.string() + " (epoch 3, step 6)").c_str(),
                               "stopped after 1 step of this run"}))
      << r.out;
  EXPECT_FALSE(mentions(r.out, {"written at the stop"})) << r.out;
  EXPECT_EQ(nn::safetensors::load(ck.string()).metadata.at("strata.train.epoch"), "3");
  r = train(with({"--resume", ck.string()}));
  EXPECT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.out, {"epoch 4/4:", "done: 1 epoch(s)"})) << r.out;
  // With --checkpoint-every the stop is an interruption between saves, and says what the file holds.
  const fs::path every = dir() / "every.safetensors";
  r = train({"--epochs", "4", "--checkpoint", every.string(), "--checkpoint-every", "5", "--stop-after-steps", "3"});
  ASSERT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.out, {("checkpoint: " + every.string() + " holds step 2 (--checkpoint-every 5); a resume "
                                "from it redoes the 1 step after it").c_str()}))
      << r.out;
  EXPECT_EQ(nn::safetensors::load(every.string()).metadata.at("strata.step"), "2");  // epoch 1's end
}

TEST_F(HostileCli, InferenceChecksTheSameMetadata) {
  for (const MetaCase& c : {MetaCase{"strata.train.image_size", "0", "is not an integer in [1, 4096]"},
                            MetaCase{"strata.train.in_channels", "99999999999999999999", "is not an integer"},
                            MetaCase{"strata.train.model", nullptr, "lacks metadata"}}) {
    SCOPED_TRACE(c.key);
    const fs::path p = with_meta(checkpoint(), dir(), c);
    const ProgramResult r = infer({"--checkpoint", p.string(), "--idx", data_dir().string()});
    EXPECT_TRUE(runtime_error(r, {p.c_str(), c.key, c.says}));
  }
}

}  // namespace
}  // namespace strata::testing
