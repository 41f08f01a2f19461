// Hostile numbers given to strata_train and strata_infer: options that are not numbers
// of their range, learning rates that make a run diverge, and checkpoints whose
// weights are not finite.
#include <cmath>
#include <filesystem>

#include "cli_fixture.h"
#include "strata/core/file.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/safetensors.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

// A copy of the trained checkpoint whose output layer's bias holds a NaN, as a run
// that diverged before the save check wrote them.
fs::path nan_checkpoint(const fs::path& dir, std::string* tensor) {
  nn::safetensors::Contents c = nn::safetensors::load(HostileCli::checkpoint().string());
  for (auto& [name, t] : c.tensors)
    if (t.dim() == 1 && t.size(0) == 10 && name.size() > 5 && name.substr(name.size() - 5) == ".bias" &&
        name.rfind("optimizer.", 0) != 0) {
      std::vector<float> v = t.to_vector<float>();
      v[3] = std::nanf("");
      t = Tensor::from_vector(v, t.sizes());
      *tensor = name;
    }
  const fs::path p = dir / "nan.safetensors";
  nn::safetensors::save(p.string(), c.tensors, c.metadata);
  return p;
}

TEST_F(HostileCli, AHugeLearningRateEndsTheRunWithAnErrorNotANanResult) {
  const fs::path ck = dir() / "ck.safetensors";
  for (const char* lr : {"100", "10000", "1000000"}) {
    SCOPED_TRACE(lr);
    const ProgramResult r = train({"--lr", lr, "--checkpoint", ck.string(), "--checkpoint-every", "1"});
    // The finite blow-up rule stops it at the step whose loss runs away (before any
    // NaN: "train loss 2.3e24" was a finished run before).
    EXPECT_TRUE(runtime_error(r, {"training diverged: loss", "more than 10000 times the first step's loss",
                                  "smaller --lr"}));
    EXPECT_FALSE(mentions(r.out, {"nan"})) << r.out;
    // Whatever was saved before the run diverged is finite.
    if (fs::exists(ck)) EXPECT_TRUE(nn::non_finite_tensors(nn::safetensors::load(ck.string()).tensors).empty());
  }
}

// Every numeric option is checked as text at parse time: NaN, infinities, signs that
// would wrap and values outside the option's range are usage errors naming the
// option, and nothing runs.
void expect_usage_errors(HostileCli& t, const std::vector<std::vector<std::string>>& cases,
                         ProgramResult (HostileCli::*run)(const std::vector<std::string>&, ChildOptions),
                         const std::vector<std::string>& base = {}) {
  for (const auto& a : cases) {
    SCOPED_TRACE(a[0] + " " + a[1]);
    std::vector<std::string> args = base;
    args.insert(args.end(), a.begin(), a.end());
    const ProgramResult r = (t.*run)(args, {});
    EXPECT_TRUE(usage_error(r, {a[0].c_str(), a[1].c_str()}));
    EXPECT_FALSE(mentions(r.out, {"strata_"})) << "it ran: " << r.out;
  }
}

TEST_F(HostileCli, BadRealNumbersInTrainingOptionsAreUsageErrorsNamingTheOption) {
  expect_usage_errors(*this,
                      {{"--lr", "nan"}, {"--lr", "0"}, {"--lr", "-1"}, {"--lr", "inf"}, {"--lr", "1e-400"},
                       {"--lr", "2e6"}, {"--lr", "abc"}, {"--weight-decay", "nan"}, {"--weight-decay", "-5"},
                       {"--weight-decay", "2"}, {"--momentum", "nan"}, {"--momentum", "1.5"},
                       {"--warmup-epochs", "nan"}, {"--warmup-epochs", "-1"}, {"--seed", "-1"}, {"--seed", "1.5"},
                       {"--seed", "18446744073709551616"}},
                      &HostileCli::train);
  // Between options: a warm-up that does not end before the run does (a bad command line: exit 2).
  EXPECT_TRUE(usage_error(train({"--warmup-epochs", "2", "--epochs", "2"}), {"--warmup-epochs 2", "--epochs 2"}));
}

TEST_F(HostileCli, BadIntegersInTrainingOptionsAreUsageErrorsNamingTheOption) {
  expect_usage_errors(*this,
                      {{"--epochs", "0"}, {"--epochs", "-3"}, {"--epochs", "1.5"}, {"--batch-size", "0"},
                       {"--batch-size", "-1"}, {"--batch-size", "1e3"}, {"--eval-batch-size", "0"}, {"--width", "0"},
                       {"--resolution", "-1"}, {"--train-limit", "-1"}, {"--test-limit", "nan"},
                       {"--checkpoint-every", "-1"}, {"--stop-after-steps", "-5"}, {"--threads", "-1"},
                       {"--threads", "100000"}, {"--workers", "-1"}},
                      &HostileCli::train);
}

TEST_F(HostileCli, BadNumbersInInferenceOptionsAreUsageErrorsNamingTheOption) {
  expect_usage_errors(*this,
                      {{"--index", "-1"}, {"--index", "nan"}, {"--repeat", "0"}, {"--top", "0"}, {"--threads", "-1"},
                       {"--warmup", "-2"}},
                      &HostileCli::infer, {"--checkpoint", checkpoint().string(), "--idx", data_dir().string()});
}

TEST_F(HostileCli, NonFiniteCheckpointsAreRefusedNamingTheFileAndTheTensor) {
  std::string tensor;
  const fs::path nan = nan_checkpoint(dir(), &tensor);
  ASSERT_FALSE(tensor.empty());
  const std::string named = "'" + tensor + "' holds 1 NaN";
  // The refusal names the option that loads it anyway.
  ProgramResult r = infer({"--checkpoint", nan.string(), "--idx", data_dir().string()});
  EXPECT_TRUE(runtime_error(r, {nan.c_str(), named.c_str(), "diverged run", "--allow-non-finite loads it anyway"}));
  r = train({"--resume", nan.string()});
  EXPECT_TRUE(runtime_error(r, {nan.c_str(), named.c_str(), "diverged run", "--allow-non-finite loads it anyway"}));

  // Loaded anyway on request: a warning naming the tensor, then the outputs (infer) or
  // the first loss (train) are refused, blaming the checkpoint, not the learning rate.
  r = infer({"--checkpoint", nan.string(), "--idx", data_dir().string(), "--allow-non-finite"});
  EXPECT_TRUE(runtime_error(r, {"warning", named.c_str(), "output for item 0", "is not finite", "no class"}));
  EXPECT_FALSE(mentions(r.out, {"class:"})) << "a class was printed: " << r.out;
  r = train({"--resume", nan.string(), "--allow-non-finite", "--epochs", "2"});
  EXPECT_TRUE(mentions(r.err, {"warning", named.c_str()})) << r.describe();
  EXPECT_FALSE(mentions(r.out, {"warning"})) << "a warning in the log, not on stderr: " << r.out;
  EXPECT_TRUE(runtime_error(r, {"training diverged", "resumed from a checkpoint holding non-finite values",
                                nan.c_str()}));
}

TEST_F(HostileCli, DataParallelOptionsAreCheckedBeforeAnythingStarts) {
  // On a CPU backend: one process per GPU needs the cuda backend.
  EXPECT_TRUE(usage_error(train({"--nproc", "2", "--backend", "reference"}),
                          {"--nproc 2", "cuda backend", "not on 'reference'"}));
  EXPECT_TRUE(usage_error(train({"--nproc", "0"}), {"--nproc"}));
#if STRATA_HAVE_DIST
  // A launcher's environment that makes no sense names the variable.
  auto with_env = [](std::vector<std::pair<std::string, std::string>> env) {
    ChildOptions o;
    o.env = std::move(env);
    return o;
  };
  EXPECT_TRUE(usage_error(train({"--epochs", "1"}, with_env({{"RANK", "2"}, {"WORLD_SIZE", "2"}})), {"RANK is 2", "0..1"}));
  EXPECT_TRUE(usage_error(train({"--epochs", "1"}, with_env({{"RANK", "0"}, {"WORLD_SIZE", "two"}})),
                          {"WORLD_SIZE is 'two', not an integer"}));
  EXPECT_TRUE(usage_error(train({"--epochs", "1", "--backend", "reference"}, with_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}})),
                          {"world size 2", "cuda backend", "not on 'reference'"}));
#endif
}

}  // namespace
}  // namespace strata::testing
