// Nothing a user saved may be lost. A writer process saving checkpoints
// through nn::save_checkpoint (temporary file, fsync, rename, directory fsync) is
// killed with SIGKILL at random points, many times; after each kill the checkpoint
// path must load and hold either the last save the writer reported complete or the
// one after it — complete, value for value — and the next save must work whatever
// the kill left behind. Then the same for training: strata_train killed at a random
// step and resumed from its last checkpoint ends bitwise where an uninterrupted run
// ends (same seed, reference backend).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_kill_model.h"
#include "support/child_process.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/safetensors.h"
#include "support/compare.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("strata_reliability_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

int count_temporaries(const fs::path& dir, const std::string& stem) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(stem + ".tmp.", 0) == 0) ++n;
  return n;
}

// Loads `path` into a fresh model and checks every parameter against the values of
// the step the file claims; returns that step.
int64_t load_and_verify(const fs::path& path) {
  auto loaded = kill_test_model();
  const nn::CheckpointInfo info = nn::load_checkpoint(path.string(), *loaded);
  auto expected = kill_test_model();
  kill_test_fill(*expected, info.step);
  const nn::StateDict a = loaded->state_dict(), b = expected->state_dict();
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second)) << path << " step " << info.step << ": " << a[i].first;
  return info.step;
}

TEST(CheckpointKill, ThePreviousCheckpointSurvivesAndTheNewOneIsCompleteOrAbsent) {
  const fs::path dir = fresh_dir("kill");
  const fs::path path = dir / "model.safetensors";
  auto model = kill_test_model();
  kill_test_fill(*model, 0);
  // How long one save takes here sets the range of kill delays.
  const auto t0 = Clock::now();
  for (int i = 0; i < 3; ++i) nn::save_checkpoint(path.string(), *model, nullptr, 0);
  const auto save_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count() / 3;

  std::mt19937_64 rng(8);
  std::uniform_int_distribution<int64_t> delay_us(0, 4 * save_us + 1000);
  const int iterations = 50;
  int64_t last = 0;  // the newest step known complete
  int new_complete = 0, new_absent = 0, kills_mid_save = 0;
  for (int it = 0; it < iterations; ++it) {
    SCOPED_TRACE("kill " + std::to_string(it) + " after step " + std::to_string(last));
    const int temporaries_before = count_temporaries(dir, "model.safetensors");
    ChildProcess writer({STRATA_CHECKPOINT_WRITER, path.string(), std::to_string(last + 1), "1000000"},
                        (dir / "writer.err").string());
    ASSERT_EQ(writer.read_line(), "ready") << "see " << dir / "writer.err";
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    writer.kill_now();
    ASSERT_TRUE(writer.killed_by_sigkill()) << "the writer ended before the kill; see " << dir / "writer.err";
    int64_t reported = last;
    for (std::string line = writer.read_line(); !line.empty(); line = writer.read_line()) {
      ASSERT_EQ(line, "saved " + std::to_string(reported + 1));
      ++reported;
    }
    // The save in flight at the kill may have reached its rename (complete, not yet
    // reported) or not (absent); nothing in between may be visible.
    int64_t found = -1;
    ASSERT_NO_THROW(found = load_and_verify(path)) << "the checkpoint does not load after the kill";
    EXPECT_TRUE(found == reported || found == reported + 1) << "found step " << found << ", reported " << reported;
    if (found == reported + 1) ++new_complete;
    if (found == reported) ++new_absent;
    if (count_temporaries(dir, "model.safetensors") > temporaries_before) ++kills_mid_save;
    last = found;
  }
  std::printf("%d kills: %d inside a save (temporary left behind), the save in flight complete %d times, absent %d\n",
              iterations, kills_mid_save, new_complete, new_absent);
  // Otherwise the test would only have killed between saves and proven nothing.
  EXPECT_GT(kills_mid_save, 0);

  // Whatever the kills left behind (one temporary per killed save), the next save works.
  kill_test_fill(*model, last + 1);
  ASSERT_NO_THROW(nn::save_checkpoint(path.string(), *model, nullptr, last + 1));
  EXPECT_EQ(load_and_verify(path), last + 1);
  fs::remove_all(dir);
}

// ---- resume after a kill ----------------------------------------------------------

#ifdef STRATA_TRAIN_BIN

void write_idx(const fs::path& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary);
  const char magic[4] = {0, 0, 0x08, static_cast<char>(dims.size())};
  f.write(magic, 4);
  for (uint32_t d : dims) {
    const char be[4] = {static_cast<char>(d >> 24), static_cast<char>(d >> 16), static_cast<char>(d >> 8),
                        static_cast<char>(d)};
    f.write(be, 4);
  }
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(f.good()) << path;
}

// Fashion-MNIST's file layout, `n` images of class-dependent bars plus noise.
void write_split(const fs::path& dir, const std::string& prefix, uint32_t n, std::mt19937& rng) {
  std::vector<uint8_t> images(n * 28 * 28), labels(n);
  for (uint32_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng() % 10);
    labels[i] = static_cast<uint8_t>(c);
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x)
        images[(i * 28 + y) * 28 + x] = static_cast<uint8_t>((y / 3 == c ? 160 : 0) + rng() % 64);
  }
  write_idx(dir / (prefix + "-images-idx3-ubyte"), {n, 28, 28}, images);
  write_idx(dir / (prefix + "-labels-idx1-ubyte"), {n}, labels);
}

std::vector<std::string> train_args(const fs::path& data, const fs::path& checkpoint) {
  return {STRATA_TRAIN_BIN,
          "--dataset",
          "fashion-mnist",
          "--data-dir",
          data.string(),
          "--model",
          "lenet",
          "--lenet-variant",
          "keras",
          "--backend",
          "reference",
          "--dispatch",
          "direct",
          "--epochs",
          "2",
          "--batch-size",
          "8",
          "--eval-batch-size",
          "16",
          "--optimizer",
          "adam",
          "--lr",
          "0.003",
          "--seed",
          "5",
          "--no-progress",
          "--checkpoint",
          checkpoint.string()};
}

void run_to_completion(std::vector<std::string> args, const fs::path& err) {
  ChildProcess p(args, err.string());
  while (!p.read_line().empty()) {
  }
  ASSERT_TRUE(p.exited_ok()) << "strata_train failed; see " << err;
}

void expect_same_checkpoint(const fs::path& got, const fs::path& want) {
  const auto a = nn::safetensors::load(got.string()), b = nn::safetensors::load(want.string());
  EXPECT_EQ(a.metadata.at("strata.step"), b.metadata.at("strata.step"));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    EXPECT_TRUE(bitwise_equal(a.tensors[i].second, b.tensors[i].second)) << a.tensors[i].first;
  }
}

TEST(ResumeAfterKill, ContinuesFromTheLastCompleteCheckpointBitwise) {
  const fs::path dir = fresh_dir("resume");
  std::mt19937 data_rng(3);
  fs::create_directories(dir / "data");
  write_split(dir / "data", "train", 48, data_rng);  // 6 steps of 8 per epoch, 12 in all
  write_split(dir / "data", "t10k", 16, data_rng);
  const fs::path reference = dir / "uninterrupted.safetensors";
  run_to_completion(train_args(dir / "data", reference), dir / "train.err");

  // Checkpointing after every step must not change the run either; its duration sets
  // the range of kill delays.
  auto every_step = [&](const fs::path& ck) {
    std::vector<std::string> a = train_args(dir / "data", ck);
    a.insert(a.end(), {"--checkpoint-every", "1"});
    return a;
  };
  const auto t0 = Clock::now();
  run_to_completion(every_step(dir / "every_step.safetensors"), dir / "train.err");
  const auto run_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  expect_same_checkpoint(dir / "every_step.safetensors", reference);

  // Each trial kills the run, resumes it, kills the resumed run, ... up to three times,
  // then lets it finish.
  std::mt19937_64 rng(12);
  std::uniform_int_distribution<int64_t> delay_ms(run_ms / 20, run_ms);
  int resumed_mid_run = 0, kills = 0;
  for (int trial = 0; trial < 6; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const fs::path ck = dir / ("killed_" + std::to_string(trial) + ".safetensors");
    auto args_now = [&] {
      std::vector<std::string> a = every_step(ck);
      if (fs::exists(ck)) a.insert(a.end(), {"--resume", ck.string()});
      return a;
    };
    bool finished = false;
    std::string steps;
    for (int k = 0; k < 3 && !finished; ++k) {
      ChildProcess p(args_now(), (dir / "train.err").string());
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
      p.kill_now();
      if (!p.killed_by_sigkill()) {
        ASSERT_TRUE(p.exited_ok()) << "strata_train failed; see " << dir / "train.err";
        finished = true;
        break;
      }
      ++kills;
      const int64_t step =
          fs::exists(ck) ? std::stoll(nn::safetensors::load(ck.string()).metadata.at("strata.step")) : 0;
      resumed_mid_run += step > 0 && step < 12;
      steps += " " + std::to_string(step);
    }
    if (!finished) run_to_completion(args_now(), dir / "train.err");
    std::printf("trial %d: killed at checkpointed steps%s, then %s\n", trial, steps.c_str(),
                finished ? "finished on its own" : "resumed to the end");
    expect_same_checkpoint(ck, reference);
  }
  std::printf("%d kills, %d of them after a checkpoint and before the end (run with checkpoints: %lld ms)\n", kills,
              resumed_mid_run, static_cast<long long>(run_ms));
  EXPECT_GT(resumed_mid_run, 0) << "no kill landed between the first and the last checkpoint";
  fs::remove_all(dir);
}

#endif  // STRATA_TRAIN_BIN

}  // namespace
}  // namespace strata::testing
