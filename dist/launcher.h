#pragma once
// The one-machine launcher behind `strata_train --nproc N`: starts N copies of the
// program, one per GPU, each told its rank through the variables torchrun sets (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), its GPU through CUDA_VISIBLE_DEVICES, and
// where rank 0 leaves NCCL's unique id through STRATA_DIST_ID_FILE: a file in a
// private (0700) temporary folder, so no network service is involved. The children
// are fresh programs (fork + exec), so nothing of the parent's CUDA state leaks in.
//
// Failure: when one child fails (non-zero exit or a signal) the launcher stops the
// others (SIGTERM, then SIGKILL after a grace period) and returns the failure's status;
// a child whose launcher dies gets SIGTERM. So a dead rank never leaves the others
// waiting in a collective.
#include <string>
#include <utility>
#include <vector>

#include "strata/dist/bootstrap.h"  // kIdFileVar

namespace strata::dist {

// Removes every "--nproc N" / "--nproc=N" from args (the children must not launch again).
std::vector<std::string> strip_nproc(const std::vector<std::string>& args);

// Throws strata::Error naming --nproc when nproc < 1, or exceeds the GPUs visible
// (gpus; `why_no_gpu` says why there are none, when there are none).
void check_nproc(int nproc, int gpus, const std::string& why_no_gpu);

// The variables child `rank` of `nproc` gets (besides the parent's environment).
// visible: the parent's CUDA_VISIBLE_DEVICES (nullptr: unset).
std::vector<std::pair<std::string, std::string>> child_env(int rank, int nproc, const std::string& id_file,
                                                           const char* visible);

struct LaunchOptions {
  double grace_seconds = 5;  // between SIGTERM and SIGKILL for the survivors of a failure
  bool quiet = false;        // no "rank k failed" line on stderr
};

struct LaunchResult {
  int status = 0;            // 0: every child succeeded; else the first failure's (128+signal for a signal)
  int failed_rank = -1;      // that child's rank
  std::string message;       // "rank 1 (pid 1234) was killed by signal 9 (Killed)"
};

// Runs program `argv` (argv[0] the path) nproc times with child_env and waits for all.
LaunchResult launch(const std::vector<std::string>& argv, int nproc, const LaunchOptions& o = {});

// This program's path, for relaunching itself (/proc/self/exe resolved).
std::string self_executable();

}  // namespace strata::dist
