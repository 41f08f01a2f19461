#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include "strata/core/error.h"
#include "strata/dist/launcher.h"

namespace strata::dist {
namespace {

namespace fs = std::filesystem;

std::string error_of(int nproc, int gpus, const std::string& why = {}) {
  try {
    check_nproc(nproc, gpus, why);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Launcher, StripsNproc) {
  EXPECT_EQ(strip_nproc({"prog", "--nproc", "2", "--model", "resnet18", "--nproc=4", "--epochs", "1"}),
            (std::vector<std::string>{"prog", "--model", "resnet18", "--epochs", "1"}));
  EXPECT_EQ(strip_nproc({"prog"}), (std::vector<std::string>{"prog"}));
}

TEST(Launcher, ChecksNprocAgainstGpus) {
  EXPECT_EQ(error_of(2, 2), "(no error)");
  EXPECT_EQ(error_of(1, 0), "(no error)");  // one process needs no launcher, nor a GPU
  EXPECT_NE(error_of(3, 2).find("--nproc 3 asks for more processes than the 2 GPU(s) visible"), std::string::npos);
  EXPECT_NE(error_of(0, 2).find("--nproc must be at least 1, got 0"), std::string::npos);
  EXPECT_NE(error_of(2, 0, "no CUDA device").find("--nproc 2: no GPU is usable here (no CUDA device)"),
            std::string::npos);
}

TEST(Launcher, ChildEnvironment) {
  std::map<std::string, std::string> env;
  for (auto& [k, v] : child_env(1, 2, "/tmp/x/id", "5,7")) env[k] = v;
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "7");
  EXPECT_EQ(env[kIdFileVar], "/tmp/x/id");
  env.clear();
  for (auto& [k, v] : child_env(0, 2, "/id", nullptr)) env[k] = v;
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0");
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "strata-launcher-test-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Launcher, RunsEveryRankWithItsEnvironment) {
  TempDir dir;
  const std::string script = "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $CUDA_VISIBLE_DEVICES $" + std::string(kIdFileVar) +
                             " $0\" > " + dir.path.string() + "/rank$RANK";
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  const LaunchResult r = launch({"/bin/sh", "-c", script, "argzero"}, 3);
  EXPECT_EQ(r.status, 0) << r.message;
  std::string id_file;
  for (int k = 0; k < 3; ++k) {
    std::istringstream in(slurp(dir.path / ("rank" + std::to_string(k))));
    std::string rank, world, local, dev, id, arg;
    in >> rank >> world >> local >> dev >> id >> arg;
    EXPECT_EQ(rank, std::to_string(k));
    EXPECT_EQ(world, "3");
    EXPECT_EQ(local, std::to_string(k));
    EXPECT_EQ(dev, std::to_string(k));
    EXPECT_EQ(arg, "argzero");
    if (k == 0) id_file = id;
    EXPECT_EQ(id, id_file) << "every rank must be told the same id file";
  }
  // The id file's private folder is removed once the ranks are done.
  EXPECT_FALSE(id_file.empty());
  EXPECT_FALSE(fs::exists(fs::path(id_file).parent_path()));
}

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Launcher, AFailingRankStopsTheOthers) {
  LaunchResult r;
  LaunchOptions o;
  o.quiet = true;
  // Rank 1 fails at once; the others would sleep for a minute.
  const double s = seconds_of([&] {
    r = launch({"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 60"}, 3, o);
  });
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_NE(r.message.find("rank 1 (pid "), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("exited with status 3"), std::string::npos) << r.message;
  EXPECT_LT(s, 20.0);
}

TEST(Launcher, ARankKilledBySignalIsReportedAndSurvivorsIgnoringTermAreKilled) {
  LaunchResult r;
  LaunchOptions o;
  o.quiet = true;
  o.grace_seconds = 0.5;
  const double s = seconds_of([&] {
    r = launch({"/bin/sh", "-c", "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; trap '' TERM; exec sleep 60"}, 2, o);
  });
  EXPECT_EQ(r.status, 128 + 9);
  EXPECT_EQ(r.failed_rank, 0);
  EXPECT_NE(r.message.find("killed by signal 9"), std::string::npos) << r.message;
  EXPECT_LT(s, 20.0);
}

TEST(Launcher, AProgramThatCannotRunIsNamed) {
  LaunchOptions o;
  o.quiet = true;
  const LaunchResult r = launch({"/nonexistent/strata_train"}, 2, o);
  EXPECT_EQ(r.status, 127);
  EXPECT_NE(r.message.find("could not run '/nonexistent/strata_train'"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace strata::dist
