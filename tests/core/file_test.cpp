// core/file.h: the reader every reader of strata shares (regular files only, never
// more than their size, never a hang), output checks, and the writer's lock.
#include "strata/core/file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <future>

#include "support/child_process.h"
#include "support/expect_error.h"
#include "support/special_files.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_file_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  fs::path dir_;
};

// Runs read_regular_file(path) on another thread; a read that has not ended after 5 s
// is a hang (the FIFO case is then unblocked by opening its write end).
std::string read_error(const fs::path& path) {
  auto f = std::async(std::launch::async, [&]() -> std::string {
    try {
      read_regular_file(path);
      return "(no error)";
    } catch (const Error& e) {
      return e.what();
    }
  });
  if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    ADD_FAILURE() << "read_regular_file(" << path << ") hung";
  }
  return f.get();
}

TEST_F(FileTest, ReadsARegularFileExactly) {
  std::string bytes(100000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + 7);
  const fs::path p = write("data.bin", bytes);
  const std::vector<uint8_t> got = read_regular_file(p);
  ASSERT_EQ(got.size(), bytes.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin(), [](uint8_t a, char b) { return a == uint8_t(b); }));
  EXPECT_TRUE(read_regular_file(write("empty", "")).empty());
  // A symbolic link to a regular file is that file.
  EXPECT_EQ(read_regular_file(make_symlink(dir_, "link", p)).size(), bytes.size());
}

TEST_F(FileTest, RefusesEveryKindOfNonRegularFileNamingItWithoutHanging) {
  for (const SpecialFile& s : make_special_files(dir_)) {
    SCOPED_TRACE(s.label);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = read_error(s.path);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    EXPECT_TRUE(message_contains(msg, {s.path.c_str(), s.kind.c_str(), "not a regular file"}));
  }
  // The system's own devices too: a reader that read /dev/zero would grow forever.
  for (const char* dev : {"/dev/zero", "/dev/urandom", "/dev/null"})
    EXPECT_TRUE(message_contains(read_error(dev), {dev, "a character device", "not a regular file"}));
}

TEST_F(FileTest, MissingFilesAndSizeLimitsAreNamed) {
  EXPECT_STRATA_ERROR(read_regular_file(dir_ / "absent"), "absent", "no such file");
  const fs::path f = write("file", "abc");
  EXPECT_STRATA_ERROR(read_regular_file(f / "below"), "below", "no such file", "not a directory");
  EXPECT_STRATA_ERROR(read_regular_file(write("big", std::string(1000, 'x')), 999), "big", "1000 bytes",
                      "limit of 999");
  EXPECT_EQ(read_regular_file(dir_ / "big", 1000).size(), 1000u);
}

TEST_F(FileTest, ReadsARangeOfAFileWithinItsSizeOnly) {
  std::string bytes(5000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 13 + 1);
  const fs::path p = write("blob.data", bytes);
  std::vector<uint8_t> got(1000);
  EXPECT_EQ(read_file_range(p, 3001, got), 5000u);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin() + 3001, [](uint8_t a, char b) { return a == uint8_t(b); }));
  EXPECT_EQ(read_file_range(p, 5000, {}), 5000u);  // an empty range at the end
  EXPECT_STRATA_ERROR(read_file_range(p, 4001, got), "blob.data", "1000 bytes from offset 4001 lie past its end",
                      "it holds 5000 bytes");
  EXPECT_STRATA_ERROR(read_file_range(p, UINT64_MAX, got), "lie past its end");
  EXPECT_STRATA_ERROR(read_file_range(dir_ / "absent", 0, got), "absent", "no such file");
  for (const SpecialFile& s : make_special_files(dir_))
    EXPECT_STRATA_ERROR(read_file_range(s.path, 0, got), s.path.c_str(), "not a regular file");
}

TEST_F(FileTest, AKernelFileThatClaimsNoSizeIsRefusedNotReadUnbounded) {
  // /proc files report size 0 and hold more: read to their size, they would be cut
  // silently; the reader says so instead.
  if (!fs::exists("/proc/self/status")) GTEST_SKIP() << "no /proc";
  EXPECT_STRATA_ERROR(read_regular_file("/proc/self/status"), "/proc/self/status", "more than the 0 bytes");
}

TEST_F(FileTest, FileKindAndSameFile) {
  const fs::path a = write("a", "x");
  EXPECT_EQ(file_kind(a), "a regular file");
  EXPECT_EQ(file_kind(dir_), "a directory");
  EXPECT_EQ(file_kind(dir_ / "absent"), std::nullopt);
  EXPECT_EQ(file_kind(make_fifo(dir_, "p")), "a FIFO (named pipe)");
  EXPECT_TRUE(same_file(a, make_symlink(dir_, "sym", a)));
  fs::create_hard_link(a, dir_ / "hard");
  EXPECT_TRUE(same_file(a, dir_ / "hard"));
  EXPECT_FALSE(same_file(a, write("b", "x")));
  // Not created yet: the same path however it is spelled.
  EXPECT_TRUE(same_file(dir_ / "new", dir_ / "sub" / ".." / "new"));
  EXPECT_FALSE(same_file(dir_ / "new", dir_ / "new2"));
  EXPECT_FALSE(same_file(a, dir_ / "new"));
}

TEST_F(FileTest, OutputChecksRefuseNonRegularTargetsAndLeaveNothingBehind) {
  for (const SpecialFile& s : make_special_files(dir_)) {
    SCOPED_TRACE(s.label);
    EXPECT_STRATA_ERROR(check_output_file(s.path, 1000, "--checkpoint"), "--checkpoint", s.path.c_str(),
                        s.kind.c_str(), "refusing to write over it");
  }
  check_output_file(dir_ / "sub" / "dir" / "out.safetensors", 1 << 20, "--checkpoint");
  EXPECT_TRUE(fs::is_directory(dir_ / "sub" / "dir"));         // created, as a save would
  EXPECT_TRUE(fs::is_empty(dir_ / "sub" / "dir"));             // the trial file is gone
  const fs::path existing = write("existing", "keep me");
  check_output_file(existing, 4096, "--metrics");
  EXPECT_EQ(read_regular_file(existing).size(), 7u);  // an existing output is not touched
  // A folder that cannot be made: its parent is a file.
  EXPECT_STRATA_ERROR(check_output_file(existing / "x" / "out", 10, "--checkpoint"), "cannot create its folder");
}

TEST_F(FileTest, OutputChecksDetectAFileSystemThatCannotHoldTheOutput) {
  // A file-size limit stands in for a full disk (both fail the trial write; a real
  // full disk is the GPU machine's and the user's, not CI's). In a child process, so
  // the limit does not outlive the test.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const rlimit r{65536, 65536};
    ::setrlimit(RLIMIT_FSIZE, &r);
    int code = 0;
    try {
      check_output_file(dir_ / "small.safetensors", 4096, "--checkpoint");  // fits
      code = 1;
      check_output_file(dir_ / "big.safetensors", 1 << 20, "--checkpoint");  // does not
      code = 2;
    } catch (const Error& e) {
      const std::string m = e.what();
      if (code == 1 && m.find("trial write") != std::string::npos && m.find("big.safetensors") != std::string::npos &&
          m.find("File too large") != std::string::npos)
        code = 0;
      else
        code = 3;
    }
    ::_exit(code);  // still alive: SIGXFSZ did not kill it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the small output failed, 2: the big one passed, 3: wrong message";
  EXPECT_FALSE(fs::exists(dir_ / ("big.safetensors.tmp." + std::to_string(pid))));
}

TEST_F(FileTest, TheLockRefusesASecondHolderNamingTheFirstAndIsReleased) {
  const fs::path ck = dir_ / "run.safetensors";
  {
    FileLock first(ck, "--checkpoint");
    EXPECT_TRUE(fs::exists(dir_ / "run.safetensors.lock"));
    // flock locks belong to open files, so a second open in this process conflicts
    // just as another process would.
    EXPECT_STRATA_ERROR(FileLock(ck, "--checkpoint"), "--checkpoint", ck.c_str(), "another process",
                        ("pid " + std::to_string(::getpid())).c_str(), "run.safetensors.lock");
    FileLock other(dir_ / "other.safetensors", "--checkpoint");  // another path is free
  }
  EXPECT_FALSE(fs::exists(dir_ / "run.safetensors.lock"));
  FileLock again(ck, "--checkpoint");
  EXPECT_EQ(again.stale_holder(), "") << "a free lock file is not stale";
  // A lock file left by a killed holder holds no lock: the next holder takes it, and
  // tells whose it was.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FileLock* leaked = new FileLock(dir_ / "killed.safetensors", "--checkpoint");
    (void)leaked;
    ::_exit(0);  // no destructor: the file stays, the kernel drops the lock
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(fs::exists(dir_ / "killed.safetensors.lock"));
  FileLock taken(dir_ / "killed.safetensors", "--checkpoint");
  EXPECT_EQ(taken.stale_holder(), std::to_string(pid));
}

TEST_F(FileTest, OutputChecksGiveTheCauseOfAPathThatCannotBeExamined) {
  const fs::path path = dir_ / (std::string(300, 'n') + ".safetensors");
  try {
    check_output_file(path, 16, "--checkpoint");
    FAIL() << "a name longer than the file system allows was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot be written: " + std::string(std::strerror(ENAMETOOLONG)) + " (its name has 312 bytes"),
              std::string::npos) << m;
    EXPECT_EQ(m.find("regular file"), std::string::npos) << m;
  }
}

TEST_F(FileTest, StaleTemporariesOfDeadWritersAreRemovedAndListed) {
  const fs::path ck = dir_ / "run.safetensors";
  const pid_t dead = pid_of_no_process();
  ASSERT_GT(dead, 1);
  const fs::path stale = ck.string() + ".tmp." + std::to_string(dead);
  const fs::path fresh = ck.string() + ".tmp." + std::to_string(dead - 1);
  const fs::path live = ck.string() + ".tmp." + std::to_string(::getpid());
  const fs::path other = dir_ / ("other.safetensors.tmp." + std::to_string(dead));
  for (const fs::path& f : {stale, fresh, live, other}) std::ofstream(f) << "partial";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(1));
  EXPECT_EQ(remove_stale_temporaries(ck, std::chrono::minutes(1)), std::vector<fs::path>{stale});
  EXPECT_TRUE(fs::exists(fresh)) << "a recent one is spared when asked to";
  EXPECT_EQ(remove_stale_temporaries(ck, std::chrono::seconds(0)), std::vector<fs::path>{fresh});
  EXPECT_TRUE(fs::exists(live)) << "the temporary of a process that runs was removed";
  EXPECT_TRUE(fs::exists(other)) << "another path's temporary was removed";
}

}  // namespace
}  // namespace strata::testing
