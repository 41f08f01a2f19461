// Hostile outputs given to strata_train: paths that are the run's own inputs, files
// that are not regular files, one path for two outputs, two runs writing one
// checkpoint, and folders that cannot take a checkpoint. Each must be refused at
// start-up, before a step runs, naming the option, the path and the reason, and leave
// what was there untouched.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli_fixture.h"
#include "strata/core/file.h"
#include "support/special_files.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

// Nothing was trained: the run stopped before its first epoch line.
::testing::AssertionResult nothing_trained(const ProgramResult& r) {
  if (mentions(r.out, {"epoch 1/"})) return ::testing::AssertionFailure() << "it trained: " << r.out;
  return ::testing::AssertionSuccess();
}

TEST_F(HostileCli, OutputsThatAreInputsOfTheRunAreRefusedAndLeftIntact) {
  const fs::path data = copy_of_data("data");
  const fs::path images = data / "train-images-idx3-ubyte";
  const std::vector<uint8_t> before = read_regular_file(images);
  for (const char* option : {"--checkpoint", "--metrics"}) {
    SCOPED_TRACE(option);
    ProgramResult r = train({"--data-dir", data.string(), option, images.string()});
    EXPECT_TRUE(runtime_error(r, {option, images.c_str(), "is an input of this run", "destroy the data"}));
    EXPECT_TRUE(nothing_trained(r));
    // The same file under another name: a symbolic link, and a path with "..".
    const fs::path link = make_symlink(dir(), std::string("link") + option, images);
    r = train({"--data-dir", data.string(), option, link.string()});
    EXPECT_TRUE(runtime_error(r, {option, "is an input of this run"}));
    r = train({"--data-dir", data.string(), option, (data / ".." / "data" / "t10k-labels-idx1-ubyte").string()});
    EXPECT_TRUE(runtime_error(r, {option, "is an input of this run"}));
  }
  EXPECT_EQ(read_regular_file(images), before);
}

TEST_F(HostileCli, OutputsThatAreNotRegularFilesAreRefusedAndLeftAsTheyWere) {
  for (const SpecialFile& s : make_special_files(dir())) {
    for (const char* option : {"--checkpoint", "--metrics"}) {
      SCOPED_TRACE(s.label + " as " + option);
      const ProgramResult r = train({option, s.path.string()});
      EXPECT_TRUE(runtime_error(r, {option, s.path.c_str(), s.kind.c_str(), "refusing to write over it"}));
      EXPECT_TRUE(nothing_trained(r));
      EXPECT_EQ(file_kind(s.path), s.kind) << "the " << s.label << " was replaced";
    }
  }
}

TEST_F(HostileCli, OnePathForTwoOutputsIsRefused) {
  const fs::path ck = dir() / "run.safetensors";
  ProgramResult r = train({"--checkpoint", ck.string(), "--metrics", ck.string()});
  EXPECT_TRUE(runtime_error(r, {"--checkpoint and --metrics both name", ck.c_str()}));
  EXPECT_TRUE(nothing_trained(r));
  r = train({"--checkpoint", ck.string(), "--metrics", (dir() / "sub" / ".." / "run.safetensors").string()});
  EXPECT_TRUE(runtime_error(r, {"--checkpoint and --metrics both name"}));
  // The metrics appended to the checkpoint a run resumes from would destroy it...
  ASSERT_TRUE(succeeded(train({"--checkpoint", ck.string()})));
  r = train({"--resume", ck.string(), "--metrics", ck.string(), "--epochs", "2"});
  EXPECT_TRUE(runtime_error(r, {"--metrics", "is the checkpoint given to --resume"}));
  // ...while resuming from a checkpoint and writing on to it is how a run continues.
  r = train({"--resume", ck.string(), "--checkpoint", ck.string(), "--epochs", "2"});
  EXPECT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.out, {"epoch 2/2", "checkpoint: "})) << r.out;
  EXPECT_FALSE(fs::exists(dir() / "run.safetensors.lock")) << "the lock outlived the run";
}

TEST_F(HostileCli, ASecondRunWritingTheSameCheckpointIsRefusedNamingTheFirst) {
  const fs::path ck = dir() / "shared.safetensors";
  // The first run trains for long enough to be killed while the second starts.
  ChildProcess first({STRATA_TRAIN_BIN, "--data-dir", data_dir().string(), "--lenet-variant", "keras", "--backend",
                      "reference", "--epochs", "100000", "--batch-size", "32", "--no-progress", "--checkpoint",
                      ck.string()},
                     ChildOptions{});
  std::string line;
  do line = first.read_line(std::chrono::seconds(30));
  while (!line.empty() && line.rfind("strata_train: dataset", 0) != 0);
  ASSERT_FALSE(line.empty()) << "the first run did not start";
  const ProgramResult second = train({"--checkpoint", ck.string()});
  EXPECT_TRUE(runtime_error(second, {"--checkpoint", ck.c_str(), "is being written by another process",
                                     ("pid " + std::to_string(first.pid())).c_str(), "shared.safetensors.lock"}));
  EXPECT_TRUE(nothing_trained(second));
  first.kill_now();
  EXPECT_TRUE(first.killed_by_sigkill());
  // A lock left by a killed run holds nothing: the next run takes it, and says so.
  const ProgramResult next = train({"--checkpoint", ck.string()});
  EXPECT_TRUE(succeeded(next));
  EXPECT_TRUE(mentions(next.err, {"took over the lock", "shared.safetensors.lock",
                                  ("left by pid " + std::to_string(first.pid())).c_str()}))
      << next.err;
}

TEST_F(HostileCli, WhatAKilledRunLeftBesideTheCheckpointIsTakenOverAndSaidOnStderr) {
  const fs::path ck = dir() / "run.safetensors";
  const pid_t dead = pid_of_no_process();
  ASSERT_GT(dead, 1);
  const std::string lock = ck.string() + ".lock", stale = ck.string() + ".tmp." + std::to_string(dead);
  const std::string live = ck.string() + ".tmp." + std::to_string(::getpid());  // this test's: alive
  std::ofstream(lock) << dead << "\n";
  for (const std::string& f : {stale, live}) std::ofstream(f, std::ios::binary) << "partial";
  ProgramResult r = train({"--checkpoint", ck.string()});
  ASSERT_TRUE(succeeded(r));
  const std::string took = "took over the lock '" + lock + "' left by pid " + std::to_string(dead);
  const std::string removed = "removed '" + stale + "', a partial write left by pid " + std::to_string(dead);
  EXPECT_TRUE(mentions(r.err, {took.c_str(), removed.c_str()})) << r.err;
  EXPECT_EQ(r.err.find("took over"), r.err.rfind("took over")) << "said more than once: " << r.err;
  EXPECT_FALSE(mentions(r.out, {"took over"}) || mentions(r.out, {"removed"})) << r.out;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live)) << "the temporary of a process that runs was removed";
  EXPECT_FALSE(fs::exists(lock)) << "the lock outlived the run";
  // A clean start has nothing to say.
  fs::remove(live);
  r = train({"--checkpoint", ck.string(), "--resume", ck.string(), "--epochs", "2"});
  EXPECT_TRUE(succeeded(r));
  EXPECT_FALSE(mentions(r.err, {"took over"}) || mentions(r.err, {"removed"})) << r.err;
}

TEST_F(HostileCli, ANameTooLongForTheFileSystemIsRefusedForThatReasonAlone) {
  const fs::path path = dir() / (std::string(300, 'n') + ".safetensors");
  for (const char* option : {"--checkpoint", "--metrics"}) {
    SCOPED_TRACE(option);
    const ProgramResult r = train({option, path.string()});
    EXPECT_TRUE(runtime_error(r, {option, path.c_str(), "cannot be written: File name too long", "312 bytes",
                                  "nothing is lost"}));
    EXPECT_FALSE(mentions(r.err, {"not a regular file"}) || mentions(r.err, {"refusing to write over"})) << r.err;
    EXPECT_TRUE(nothing_trained(r));
  }
}

TEST_F(HostileCli, AFolderThatCannotTakeTheCheckpointFailsBeforeTraining) {
  // Read-only: a folder without write permission (root ignores that: then sysfs,
  // where no one can create a file).
  const fs::path ro = dir() / "read_only";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  fs::path target = ro / "ck.safetensors";
  if (std::ofstream(ro / "probe").good()) {
    fs::remove(ro / "probe");
    target = "/sys/strata_test.safetensors";
    if (std::ofstream(target).good() || !fs::is_directory("/sys")) GTEST_SKIP() << "no folder here refuses writes";
  }
  ProgramResult r = train({"--checkpoint", target.string()});
  EXPECT_TRUE(runtime_error(r, {"--checkpoint", target.c_str(), "cannot create a file in", "nothing is lost"}));
  EXPECT_TRUE(nothing_trained(r));
  // Full: a file-size limit below the checkpoint's size stands in for a full disk (the
  // trial reserves the checkpoint's whole size, as the real save will need).
  r = train({"--checkpoint", (dir() / "big.safetensors").string()}, ChildOptions{.file_size_limit = 16384});
  EXPECT_TRUE(runtime_error(r, {"--checkpoint", "big.safetensors", "trial write", "File too large"}));
  EXPECT_TRUE(nothing_trained(r));
  EXPECT_TRUE(fs::is_empty(dir() / "read_only"));
  EXPECT_FALSE(fs::exists(dir() / "big.safetensors"));
}

}  // namespace
}  // namespace strata::testing
