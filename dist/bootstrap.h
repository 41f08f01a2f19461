#pragma once
// How NCCL's unique id (128 bytes that rank 0 creates) reaches every other rank of a job
// before they can form a communicator. Two ways, chosen per job:
// - a file (`id_file`): rank 0 writes it under a temporary name and renames it, so no rank
//   reads half of it; the others poll for it. strata_train --nproc puts it in a private
//   folder; a job across machines names a path on a filesystem all of them share.
// - MPI (dist/mpi_bootstrap.h): in a job started by Open MPI's mpirun with no id file, rank
//   0 broadcasts the bytes over MPI_COMM_WORLD. Only in a build with MPI (STRATA_WITH_MPI).
// An id file, when given, always wins; a job of one rank exchanges nothing. No CUDA or NCCL
// here: the id is a blob of bytes, so all of it is tested on any machine.
#include <cstddef>
#include <span>
#include <string>

#include "strata/dist/rank_env.h"

namespace strata::dist {

// The variable that tells every rank where rank 0 leaves the unique id.
inline constexpr const char* kIdFileVar = "STRATA_DIST_ID_FILE";

enum class IdTransport {
  none,  // a job of one rank
  file,
  mpi,
};
const char* id_transport_name(IdTransport t);

// Whether Open MPI's mpirun started this process (OMPI_COMM_WORLD_SIZE is set).
bool started_by_mpirun(const EnvLookup& env = {});

// The transport `info`'s rank uses (see above). Throws strata::Error when a job of several
// ranks has none: no id file, and MPI either not built or not the launcher; the message
// says how to get one.
IdTransport choose_id_transport(const RankInfo& info, const std::string& id_file, const EnvLookup& env = {});

// Rank 0's `blob` into `blob` of every rank, through choose_id_transport's choice, which it
// returns. Collective: every rank of the job calls it with the same size; rank 0's bytes
// are left as they are. Every wait for another rank is bounded by timeout_seconds; past it,
// strata::Error names the rank, the transport and what did not arrive.
IdTransport share_from_rank0(std::span<std::byte> blob, const RankInfo& info, const std::string& id_file,
                             double timeout_seconds, const EnvLookup& env = {});

}  // namespace strata::dist
