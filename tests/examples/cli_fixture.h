#pragma once
// strata_train and strata_infer run as programs, as a hostile but fair user runs them:
// the fixture of the hostile command-line tests (cli_*_test.cpp). Each run is a child
// process with a deadline, so a hang fails its test; each counts as one hostile case
// (the total is printed when the whole binary runs: docs/reliability.md quotes it).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/child_process.h"

namespace strata::testing {

class HostileCli : public ::testing::Test {
 public:
  // The synthetic dataset (train 64, test 32 images) and a checkpoint trained on it,
  // made once per process.
  static const std::filesystem::path& data_dir();
  static const std::filesystem::path& checkpoint();
  static int cases();  // hostile runs so far in this process

  using Args = std::vector<std::string>;

  // strata_train with `args`, plus the options of a tiny run (synthetic
  // Fashion-MNIST-like IDX data, keras LeNet, reference backend, 1 epoch of 2 steps,
  // no progress bar) for each one `args` does not give.
  ProgramResult train(const Args& args, ChildOptions options = {});
  // strata_infer with `args` (and --repeat 1 --warmup 0 unless given).
  ProgramResult infer(const Args& args, ChildOptions options = {});
  // This test's scratch folder (removed after the test).
  const std::filesystem::path& dir() const { return dir_; }
  // A copy of the synthetic dataset this test may damage.
  std::filesystem::path copy_of_data(const std::string& name) const;

 protected:
  void SetUp() override;
  void TearDown() override;

 private:
  std::filesystem::path dir_;
};

// Expectations on a finished run. A usage error (a bad option) exits with a code of
// its own, not 0 and not 1 (the runtime-error code); both name `parts` on stderr.
::testing::AssertionResult runtime_error(const ProgramResult& r, std::initializer_list<const char*> parts);
::testing::AssertionResult usage_error(const ProgramResult& r, std::initializer_list<const char*> parts);
::testing::AssertionResult succeeded(const ProgramResult& r);
::testing::AssertionResult mentions(const std::string& text, std::initializer_list<const char*> parts);

}  // namespace strata::testing
