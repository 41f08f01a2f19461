#pragma once
// Child processes for the tests that run strata's programs: fork + exec with stdout
// (and, unless sent to a file, stderr) on pipes the test reads, in their own process
// group, killed with the test if the test dies (so a failed test never leaves a
// program running), and killed at a deadline (so a program that hangs fails its test
// instead of hanging the suite).
#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace strata::testing {

struct ChildOptions {
  std::string stderr_file;  // "": stderr is captured like stdout
  std::vector<std::pair<std::string, std::string>> env;  // set in the child
  long long file_size_limit = -1;  // RLIMIT_FSIZE of the child in bytes (-1: inherited)
};

// How a finished program ended, and what it printed.
struct ProgramResult {
  int exit_code = -1;      // when it exited
  int signal = 0;          // when a signal ended it
  bool timed_out = false;  // killed at the deadline
  std::string out, err;
  bool exited(int code) const { return !timed_out && signal == 0 && exit_code == code; }
  // "exit 1 after 0.4 s" plus both streams, for failure messages.
  std::string describe() const;
  double seconds = 0;
};

class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, ChildOptions options);
  // stderr appended to `stderr_file`.
  ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_file)
      : ChildProcess(argv, ChildOptions{stderr_file, {}, -1}) {}
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The next line of the child's stdout, or "" at end of file or after `timeout`.
  std::string read_line(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  void kill_now();
  // Waits for the child; returns its wait status.
  int wait();
  bool killed_by_sigkill();
  bool exited_ok();
  // Reads both streams to their end and waits; kills the process group at the deadline.
  ProgramResult finish(std::chrono::milliseconds timeout);

 private:
  // Reads what is available within `ms` milliseconds; false at end of both streams.
  bool pump(int ms);

  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  std::string out_buf_, err_buf_;
  std::chrono::steady_clock::time_point start_;
};

// Runs argv to its end (at most `timeout`) and returns what happened.
ProgramResult run_program(const std::vector<std::string>& argv, ChildOptions options = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A pid that no process has now (searched down from near the default pid_max), for a
// file "left by a killed process"; 0 when none is found.
pid_t pid_of_no_process();

}  // namespace strata::testing
