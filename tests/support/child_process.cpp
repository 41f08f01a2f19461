#include "support/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

extern char** environ;

namespace strata::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, ChildOptions options)
    : start_(std::chrono::steady_clock::now()) {
  int out[2], err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const bool capture_err = options.stderr_file.empty();
  if (capture_err && ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment is built before the fork: only async-signal-safe calls after it.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [k, v] : options.env) replaced = replaced || entry.rfind(k + "=", 0) == 0;
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const rlimit fsize{static_cast<rlim_t>(options.file_size_limit), static_cast<rlim_t>(options.file_size_limit)};
  const int err_file =
      capture_err ? -1 : ::open(options.stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out[1], STDOUT_FILENO);
    if (capture_err)
      ::dup2(err[1], STDERR_FILENO);
    else if (err_file >= 0)
      ::dup2(err_file, STDERR_FILENO);
    if (options.file_size_limit >= 0) ::setrlimit(RLIMIT_FSIZE, &fsize);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  if (err_file >= 0) ::close(err_file);
  ::close(out[1]);
  out_ = out[0];
  if (capture_err) {
    ::close(err[1]);
    err_ = err[0];
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    wait();
  }
  if (out_ >= 0) ::close(out_);
  if (err_ >= 0) ::close(err_);
}

bool ChildProcess::pump(int ms) {
  pollfd p[2];
  int n = 0;
  int* fds[2] = {nullptr, nullptr};
  std::string* bufs[2] = {nullptr, nullptr};
  if (out_ >= 0) p[n] = {out_, POLLIN, 0}, fds[n] = &out_, bufs[n++] = &out_buf_;
  if (err_ >= 0) p[n] = {err_, POLLIN, 0}, fds[n] = &err_, bufs[n++] = &err_buf_;
  if (n == 0) return false;
  if (::poll(p, static_cast<nfds_t>(n), ms) <= 0) return true;
  for (int i = 0; i < n; ++i) {
    if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char chunk[4096];
    const ssize_t got = ::read(*fds[i], chunk, sizeof chunk);
    if (got > 0) {
      bufs[i]->append(chunk, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      ::close(*fds[i]);
      *fds[i] = -1;
    }
  }
  return true;
}

std::string ChildProcess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const size_t nl = out_buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = out_buf_.substr(0, nl);
      out_buf_.erase(0, nl + 1);
      return line;
    }
    if (out_ < 0) return {};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {};
    pump(static_cast<int>(left.count()));
  }
}

void ChildProcess::kill_now() { ::kill(pid_, SIGKILL); }

int ChildProcess::wait() {
  if (!reaped_) {
    while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }
  return status_;
}

bool ChildProcess::killed_by_sigkill() { return WIFSIGNALED(wait()) && WTERMSIG(status_) == SIGKILL; }
bool ChildProcess::exited_ok() { return WIFEXITED(wait()) && WEXITSTATUS(status_) == 0; }

ProgramResult ChildProcess::finish(std::chrono::milliseconds timeout) {
  ProgramResult r;
  const auto deadline = start_ + timeout;
  while (out_ >= 0 || err_ >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      break;
    }
    pump(static_cast<int>(std::min<long long>(left.count(), 1000)));
  }
  wait();
  // Whatever is still buffered in the pipes after a kill.
  while (pump(0) && (out_ >= 0 || err_ >= 0)) {
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (WIFEXITED(status_)) r.exit_code = WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) r.signal = WTERMSIG(status_);
  r.out = std::move(out_buf_);
  r.err = std::move(err_buf_);
  return r;
}

std::string ProgramResult::describe() const {
  char head[128];
  if (timed_out)
    std::snprintf(head, sizeof head, "timed out after %.1f s (killed)", seconds);
  else if (signal != 0)
    std::snprintf(head, sizeof head, "killed by signal %d after %.1f s", signal, seconds);
  else
    std::snprintf(head, sizeof head, "exit %d after %.1f s", exit_code, seconds);
  return std::string(head) + "\n--- stdout:\n" + out + "\n--- stderr:\n" + err;
}

ProgramResult run_program(const std::vector<std::string>& argv, ChildOptions options,
                          std::chrono::milliseconds timeout) {
  ChildProcess p(argv, std::move(options));
  return p.finish(timeout);
}

pid_t pid_of_no_process() {
  for (pid_t pid = 4194000; pid > 1; --pid)
    if (::kill(pid, 0) != 0 && errno == ESRCH) return pid;
  return 0;
}

}  // namespace strata::testing
