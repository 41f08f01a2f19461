// The mixed-precision check before training (examples/train/precision_check.h): a
// model with an op its backend cannot run in bf16 is refused with a UsageError naming
// the op, before the trainer takes a step; a model whose ops all run is accepted.
#include <gtest/gtest.h>

#include "strata/backends/api/registry.h"
#include "examples/train/options.h"
#include "examples/train/precision_check.h"
#include "examples/train/trainer.h"
#include "support/expect_error.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

train::ModelSpec spec(const std::string& model, const std::string& precision) {
  train::ModelSpec s;
  s.model = model;
  s.lenet_variant = "keras";
  s.base_channels = 4;
  s.precision = precision;
  return s;
}

void check(const train::ModelSpec& s, ops::DispatchMode mode, const std::string& backend) {
  train::check_precision_trains(s, mode, backend, Shape{1, 28, 28}, Shape{}, DType::i64);
}

bool onednn_bf16() {
  const backends::Backend* b = backends::registry().find("onednn");
  return b != nullptr && b->supports(ops::OpId::conv2d_fwd, DType::bf16);
}

TEST(PrecisionCheck, Fp32IsNotChecked) {
  // fp32 returns before building anything: a backend that does not exist is not looked up.
  EXPECT_NO_THROW(check(spec("lenet", "fp32"), ops::DispatchMode::direct, "no-such-backend"));
  EXPECT_THROW(check(spec("lenet", "bf16"), ops::DispatchMode::direct, "no-such-backend"), train::UsageError);
}

TEST(PrecisionCheck, AnOpWithoutBf16IsNamedInEveryMode) {
  // The reference backend has no bf16 kernels: the first op of the model fails.
  for (auto mode : {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call, ops::DispatchMode::direct}) {
    try {
      check(spec("lenet", "bf16"), mode, "reference");
      ADD_FAILURE() << "accepted in " << ops::dispatch_mode_name(mode) << " mode";
    } catch (const train::UsageError& e) {
      EXPECT_TRUE(message_contains(e.what(), {"precision 'bf16' cannot train lenet on backend 'reference' in ",
                                              std::string(ops::dispatch_mode_name(mode)).c_str(), "conv2d", "bf16"}));
    }
  }
}

TEST(PrecisionCheck, OnednnRefusesLeNetsBf16DropoutAndTrainsResNet) {
  if (!onednn_bf16()) GTEST_SKIP() << "onednn is not built or this CPU has no native bf16";
  for (auto mode : {ops::DispatchMode::virtual_call, ops::DispatchMode::direct})
    EXPECT_STRATA_ERROR(check(spec("lenet", "bf16"), mode, "onednn"), "cannot train lenet on backend 'onednn'",
                        "dropout", "bf16");
  EXPECT_NO_THROW(check(spec("resnet18", "bf16"), ops::DispatchMode::direct, "onednn"));
}

TEST(PrecisionCheck, TheCapabilityCheckCountsTheLayersOpsOfAKind) {
  // bmm is a matrix product too, and onednn runs it in f32 only; a CNN's linear layers do not run
  // it, so the options' check lets bf16 through to the trial step (which then names lenet's dropout).
  if (!onednn_bf16()) GTEST_SKIP() << "onednn is not built or this CPU has no native bf16";
  EXPECT_FALSE(backends::registry().get("onednn").supports(ops::OpId::bmm, DType::bf16))
      << "the case this test is about has gone: onednn's bmm runs bf16";
  EXPECT_NO_THROW(train::check_precision("bf16", "onednn"));
  EXPECT_STRATA_ERROR(train::check_precision("bf16", "onednn", {ops::OpKind::linear}, {ops::OpId::bmm}),
                      "precision 'bf16' is not supported on backend 'onednn' for this model: its bmm runs in");
}

TEST(PrecisionCheck, TheTrainerRefusesBeforeItsFirstStep) {
  if (!onednn_bf16()) GTEST_SKIP() << "onednn is not built or this CPU has no native bf16";
  const auto dir = temp_dir("precision_check");
  write_synthetic_idx(dir / "data", 32, 16, 3);
  train::TrainOptions o = tiny_options((dir / "data").string(), "onednn", "direct");
  o.precision = "bf16";
  o.checkpoint = (dir / "never.safetensors").string();
  EXPECT_THROW(train::Trainer(train::resolve(o), nullptr, nullptr), train::UsageError);
  EXPECT_FALSE(std::filesystem::exists(o.checkpoint));
}

}  // namespace
}  // namespace strata::testing
