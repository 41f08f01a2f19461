// Quiet surprises, said out loud: more threads than CPUs, a resume with other options
// (warnings go to stderr, the log to stdout), a backend that computes nothing, and
// synchronised batch norm in one process (plain batch norm, as PyTorch's).
#include <filesystem>

#include "cli_fixture.h"
#include "examples/train/options.h"

namespace strata::testing {
namespace {

TEST_F(HostileCli, MoreThreadsThanCpusAreWarnedOnceAndKept) {
  const int cpus = train::available_cpus();
  const std::string many = std::to_string(cpus + 1);
  ProgramResult r = train({"--threads", many});
  EXPECT_TRUE(succeeded(r));
  const std::string warning = "--threads " + many + " is more than the " + std::to_string(cpus) + " CPUs";
  EXPECT_TRUE(mentions(r.err, {"warning", warning.c_str(), "kept as asked"})) << r.err;
  EXPECT_EQ(r.err.find("warning"), r.err.rfind("warning")) << "warned more than once: " << r.err;
  EXPECT_TRUE(mentions(r.out, {("OMP_NUM_THREADS=" + many).c_str()})) << r.out;
  r = infer({"--checkpoint", checkpoint().string(), "--idx", data_dir().string(), "--threads", many});
  EXPECT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.err, {warning.c_str()})) << r.err;
  r = train({"--threads", std::to_string(cpus)});
  EXPECT_TRUE(succeeded(r));
  EXPECT_FALSE(mentions(r.err, {"warning"})) << r.err;
}

TEST_F(HostileCli, AResumeWithOtherOptionsIsWarnedOnStderrNamingWhatDiffers) {
  // The checkpoint: 64 images, batch 32, 1 epoch, seed 1, on the reference backend.
  ProgramResult r = train({"--resume", checkpoint().string(), "--epochs", "2", "--seed", "9"});
  EXPECT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.err, {"warning: resume", "--epochs 2 (the checkpoint's: 1)", "--seed 9 (the checkpoint's: 1)",
                               "not as the original run would have"}))
      << r.err;
  EXPECT_FALSE(mentions(r.err, {"--batch-size"})) << "named what does not differ: " << r.err;
  EXPECT_FALSE(mentions(r.out, {"warning"})) << "a warning in the log, not on stderr: " << r.out;
  r = train({"--resume", checkpoint().string(), "--epochs", "1", "--backend", "null"});
  EXPECT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.err, {"warning: resume", "written on backend reference, this run uses null"})) << r.err;
  EXPECT_FALSE(mentions(r.out, {"warning"})) << r.out;
  // The same options: nothing to warn about.
  r = train({"--resume", checkpoint().string(), "--epochs", "1"});
  EXPECT_TRUE(succeeded(r));
  EXPECT_FALSE(mentions(r.err, {"warning"})) << r.err;
}

TEST_F(HostileCli, TheNullBackendSaysAtOnceThatItComputesNothing) {
  ProgramResult r = train({"--backend", "null"});
  EXPECT_TRUE(succeeded(r));
  const size_t note = r.out.find("note: backend null computes nothing");
  EXPECT_NE(note, std::string::npos) << r.out;
  EXPECT_LT(note, r.out.find("epoch 1/1")) << "said after the results: " << r.out;
  r = infer({"--checkpoint", checkpoint().string(), "--idx", data_dir().string(), "--backend", "null"});
  EXPECT_TRUE(succeeded(r));
  EXPECT_LT(r.out.find("note: backend null computes nothing"), r.out.find("class:")) << r.out;
  // Its weights are whatever memory held: not saved as if they were results.
  r = train({"--backend", "null", "--checkpoint", (dir() / "null.safetensors").string()});
  EXPECT_TRUE(usage_error(r, {"--checkpoint", "backend 'null' computes nothing"}));
  EXPECT_FALSE(std::filesystem::exists(dir() / "null.safetensors"));
}

TEST_F(HostileCli, SyncBatchNormInOneProcessSaysItIsPlainBatchNorm) {
  const Args resnet{"--model", "resnet18", "--width", "4", "--batch-size", "32"};
  Args synced = resnet;
  synced.push_back("--sync-bn");
  const ProgramResult r = train(synced), plain = train(resnet);
  ASSERT_TRUE(succeeded(r));
  ASSERT_TRUE(succeeded(plain));
  const size_t note = r.out.find("note: --sync-bn in one process is plain batch norm");
  EXPECT_NE(note, std::string::npos) << r.out;
  EXPECT_LT(note, r.out.find("epoch 1/1")) << "said after the results: " << r.out;
  EXPECT_EQ(plain.out.find("--sync-bn"), std::string::npos) << plain.out;
}

}  // namespace
}  // namespace strata::testing
