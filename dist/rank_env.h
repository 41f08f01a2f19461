#pragma once
// Where this process sits in a data-parallel job: its rank, the world size, and its
// rank on this machine (which picks its GPU). Read from the environment that the
// launchers set: strata_train --nproc and torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE), or OpenMPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
// _LOCAL_SIZE). Pure logic, no NCCL: tested on any machine.
#include <functional>
#include <optional>
#include <string>

namespace strata::dist {

struct RankInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;   // rank among the processes of this machine: its GPU
  int local_world = 1;  // processes on this machine
  std::string source;   // which variables said so ("RANK/WORLD_SIZE", "OMPI_COMM_WORLD_*")
};

// Looks a variable up; nullptr when unset (std::getenv by default).
using EnvLookup = std::function<const char*(const char*)>;

// The rank of this process, or nullopt when no launcher's variables are set (a
// single-process run). RANK/WORLD_SIZE win over OpenMPI's when both are set. Throws
// strata::Error naming the variable when one is malformed, out of range, or set
// without its partner (RANK without WORLD_SIZE).
std::optional<RankInfo> rank_from_env(const EnvLookup& env = {});

// The CUDA_VISIBLE_DEVICES value that leaves this rank exactly one GPU: the
// local_rank-th entry of `visible` (the current value; nullptr or empty: all GPUs,
// numbered from 0). A list of one entry is kept: the launcher already narrowed it.
// Throws naming both when the list has too few entries.
std::string device_for_rank(const RankInfo& r, const char* visible);

}  // namespace strata::dist
