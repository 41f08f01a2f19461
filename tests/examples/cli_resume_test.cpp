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
