#include "cli_fixture.h"

#include <unistd.h>

#include <cstdio>

#include "train_test_util.h"

namespace strata::testing {

namespace fs = std::filesystem;

namespace {

int g_cases = 0;

fs::path suite_root() {
  static const fs::path root = [] {
    fs::path r = fs::temp_directory_path() / ("strata_cli_" + std::to_string(::getpid()));
    fs::remove_all(r);
    fs::create_directories(r);
    return r;
  }();
  return root;
}

bool has_option(const std::vector<std::string>& args, const std::string& name) {
  for (const auto& a : args)
    if (a == name || a.rfind(name + "=", 0) == 0) return true;
  return false;
}

// Prints the count of hostile runs and removes the scratch folder at the end.
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_cases > 0) std::printf("hostile command-line cases run: %d\n", g_cases);
    std::error_code ec;
    fs::remove_all(suite_root(), ec);
  }
};
const auto* const g_reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

}  // namespace

void HostileCli::SetUp() {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : name)
    if (c == '/') c = '_';
  dir_ = suite_root() / name;
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

void HostileCli::TearDown() {
  std::error_code ec;
  fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(dir_, ec);
}

int HostileCli::cases() { return g_cases; }

ProgramResult HostileCli::train(const Args& args, ChildOptions options) {
  Args argv = {STRATA_TRAIN_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  const Args defaults[] = {{"--data-dir", data_dir().string()},
                           {"--lenet-variant", "keras"},
                           {"--backend", "reference"},
                           {"--epochs", "1"},
                           {"--train-limit", "64"},
                           {"--test-limit", "32"},
                           {"--batch-size", "32"}};
  for (const Args& d : defaults)
    if (!has_option(args, d[0])) argv.insert(argv.end(), d.begin(), d.end());
  if (!has_option(args, "--progress") && !has_option(args, "--no-progress")) argv.push_back("--no-progress");
  ++g_cases;
  return run_program(argv, std::move(options), std::chrono::seconds(30));
}

ProgramResult HostileCli::infer(const Args& args, ChildOptions options) {
  Args argv = {STRATA_INFER_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!has_option(args, "--repeat")) argv.insert(argv.end(), {"--repeat", "1"});
  if (!has_option(args, "--warmup")) argv.insert(argv.end(), {"--warmup", "0"});
  ++g_cases;
  return run_program(argv, std::move(options), std::chrono::seconds(30));
}

const fs::path& HostileCli::data_dir() {
  static const fs::path d = write_synthetic_idx(suite_root() / "data", 64, 32, 7);
  return d;
}

const fs::path& HostileCli::checkpoint() {
  static const fs::path c = [] {
    const fs::path path = suite_root() / "trained" / "lenet.safetensors";
    const ProgramResult r = run_program({STRATA_TRAIN_BIN, "--data-dir", data_dir().string(), "--lenet-variant",
                                         "keras", "--backend", "reference", "--epochs", "1", "--batch-size", "32",
                                         "--no-progress", "--checkpoint", path.string()});
    EXPECT_TRUE(r.exited(0)) << "training the test checkpoint failed: " << r.describe();
    return path;
  }();
  return c;
}

fs::path HostileCli::copy_of_data(const std::string& name) const {
  const fs::path d = dir_ / name;
  fs::copy(data_dir(), d, fs::copy_options::recursive);
  return d;
}

::testing::AssertionResult mentions(const std::string& text, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (text.find(p) == std::string::npos) return ::testing::AssertionFailure() << "lacks \"" << p << "\"";
  return ::testing::AssertionSuccess();
}

namespace {
::testing::AssertionResult failed_with(const ProgramResult& r, bool usage, std::initializer_list<const char*> parts) {
  const bool code_ok = usage ? (!r.timed_out && r.signal == 0 && r.exit_code != 0 && r.exit_code != 1) : r.exited(1);
  if (!code_ok)
    return ::testing::AssertionFailure() << "expected a " << (usage ? "usage" : "runtime")
                                         << " error; got " << r.describe();
  if (auto m = mentions(r.err, parts); !m) return m << " on stderr; got " << r.describe();
  return ::testing::AssertionSuccess();
}
}  // namespace

::testing::AssertionResult runtime_error(const ProgramResult& r, std::initializer_list<const char*> parts) {
  return failed_with(r, false, parts);
}

::testing::AssertionResult usage_error(const ProgramResult& r, std::initializer_list<const char*> parts) {
  return failed_with(r, true, parts);
}

::testing::AssertionResult succeeded(const ProgramResult& r) {
  if (r.exited(0)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.describe();
}

}  // namespace strata::testing
