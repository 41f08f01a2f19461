// dist/mpi_bootstrap.h in a build without MPI (STRATA_WITH_MPI off, or MPI not found).
#include "strata/dist/mpi_bootstrap.h"

#include "strata/core/error.h"

namespace strata::dist {

bool mpi_built() { return false; }

bool mpi_was_initialized() { return false; }

void mpi_broadcast_from_rank0(std::span<std::byte>, int rank, int world, double) {
  STRATA_FAIL("dist: rank ", rank, " of ", world, ": this build of strata has no MPI; configure it with "
              "STRATA_WITH_MPI=ON (Debian: libopenmpi-dev openmpi-bin)");
}

}  // namespace strata::dist
