#include "strata/dist/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "strata/core/error.h"
#include "strata/dist/rank_env.h"

namespace strata::dist {

std::vector<std::string> strip_nproc(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

void check_nproc(int nproc, int gpus, const std::string& why_no_gpu) {
  STRATA_CHECK(nproc >= 1, "--nproc must be at least 1, got ", nproc);
  STRATA_CHECK(gpus > 0 || nproc == 1, "--nproc ", nproc, ": no GPU is usable here",
               why_no_gpu.empty() ? "" : " (" + why_no_gpu + ")", "; data-parallel training runs one process per GPU");
  STRATA_CHECK(nproc <= gpus || nproc == 1, "--nproc ", nproc, " asks for more processes than the ", gpus,
               " GPU(s) visible here (one process per GPU; see CUDA_VISIBLE_DEVICES)");
}

std::vector<std::pair<std::string, std::string>> child_env(int rank, int nproc, const std::string& id_file,
                                                           const char* visible) {
  RankInfo r;
  r.rank = r.local_rank = rank;
  r.world = r.local_world = nproc;
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(nproc)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
          {"CUDA_VISIBLE_DEVICES", device_for_rank(r, visible)},
          {kIdFileVar, id_file}};
}

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  STRATA_CHECK(!ec, "launcher: cannot resolve /proc/self/exe: ", ec.message());
  return p.string();
}

namespace {

std::string describe_status(int rank, pid_t pid, int st) {
  std::string s = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (WIFEXITED(st)) return s + " exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return s + " was killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
  return s + " stopped";
}

int exit_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

// A private folder for the id file: readable by this user only, removed afterwards.
std::string make_private_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/strata-dist-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  STRATA_CHECK(mkdtemp(buf.data()) != nullptr, "launcher: cannot create a temporary folder from '", pattern,
               "': ", std::strerror(errno), " (set TMPDIR to a writable folder)");
  return buf.data();
}

}  // namespace

LaunchResult launch(const std::vector<std::string>& argv, int nproc, const LaunchOptions& o) {
  STRATA_CHECK(!argv.empty(), "launcher: no program to run");
  STRATA_CHECK(nproc >= 1, "--nproc must be at least 1, got ", nproc);
  const std::string dir = make_private_dir();
  const std::string id_file = dir + "/nccl_id";
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  // Each child's whole environment, built before fork: between fork and exec only
  // async-signal-safe calls are allowed (no setenv, no malloc).
  std::vector<std::vector<std::string>> envs(static_cast<size_t>(nproc));
  std::vector<std::vector<char*>> envps(static_cast<size_t>(nproc));
  for (int r = 0; r < nproc; ++r) {
    const auto vars = child_env(r, nproc, id_file, visible);
    auto& e = envs[static_cast<size_t>(r)];
    for (char** p = environ; *p; ++p) {
      const std::string entry = *p;
      bool replaced = false;
      for (const auto& [k, v] : vars) replaced = replaced || entry.rfind(k + "=", 0) == 0;
      if (!replaced) e.push_back(entry);
    }
    for (const auto& [k, v] : vars) e.push_back(k + "=" + v);
    for (auto& entry : e) envps[static_cast<size_t>(r)].push_back(entry.data());
    envps[static_cast<size_t>(r)].push_back(nullptr);
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  const pid_t parent = getpid();
  std::vector<pid_t> pids(static_cast<size_t>(nproc), -1);
  LaunchResult result;
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      result = {1, r, std::string("launcher: fork failed for rank ") + std::to_string(r) + ": " + std::strerror(errno)};
      break;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(125);  // the launcher died before prctl took effect
      execve(cargv[0], cargv.data(), envps[static_cast<size_t>(r)].data());
      _exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
  }

  // Wait for every child; after the first failure, stop the rest.
  int alive = 0;
  for (pid_t p : pids) alive += p > 0;
  std::vector<bool> done(pids.size(), false);
  bool stopping = result.status != 0;
  auto stop_time = std::chrono::steady_clock::now();
  bool killed = false;
  auto signal_rest = [&](int sig) {
    for (size_t i = 0; i < pids.size(); ++i)
      if (pids[i] > 0 && !done[i]) kill(pids[i], sig);
  };
  if (stopping) signal_rest(SIGTERM);
  while (alive > 0) {
    bool reaped = false;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0 || done[i]) continue;
      int st = 0;
      const pid_t w = waitpid(pids[i], &st, WNOHANG);
      if (w != pids[i]) continue;
      done[i] = true;
      --alive;
      reaped = true;
      const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      if (!ok && !stopping) {
        result.status = exit_code(st);
        result.failed_rank = static_cast<int>(i);
        result.message = describe_status(static_cast<int>(i), pids[i], st);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127) result.message += ": could not run '" + argv[0] + "'";
        if (!o.quiet)
          std::fprintf(stderr, "strata launcher: %s; stopping the other ranks\n", result.message.c_str());
        stopping = true;
        stop_time = std::chrono::steady_clock::now();
        signal_rest(SIGTERM);
      }
    }
    if (stopping && !killed &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_time).count() > o.grace_seconds) {
      signal_rest(SIGKILL);
      killed = true;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

}  // namespace strata::dist
