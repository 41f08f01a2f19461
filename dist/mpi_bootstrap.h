#pragma once
// A blob of bytes from rank 0 of MPI_COMM_WORLD to every rank: how NCCL's unique id travels
// in a job started by mpirun without an id file (dist/bootstrap.h decides when). mpi.h is
// included by mpi_bootstrap.cpp alone; a build without MPI compiles mpi_bootstrap_none.cpp,
// whose broadcast says so. No CUDA or NCCL: tested on any machine with MPI.
#include <cstddef>
#include <span>

namespace strata::dist {

// Whether this build has MPI (the CMake option STRATA_WITH_MPI).
bool mpi_built();

// Whether MPI_Init has run in this process, by strata or by the program (true after
// MPI_Finalize too, as MPI_Initialized answers); false in a build without MPI. Lets tests
// check that a process mpirun did not start never touches MPI.
bool mpi_was_initialized();

// Copies rank 0's `blob` into `blob` of every rank of MPI_COMM_WORLD (collective: every
// rank passes the same size). `rank` and `world` are this process's place as the launcher's
// variables say; MPI must agree, else strata::Error says both.
// MPI's lifetime: a program that initialised MPI itself keeps it as it was. Otherwise strata
// calls MPI_Init here and MPI_Finalize before returning, once every rank holds the blob
// (the .cpp says why not at exit); MPI cannot be initialised twice, so such a process can
// call this once, and a second call throws.
// Every wait is bounded by timeout_seconds: a broadcast that does not complete throws,
// leaving MPI unfinalised (the process then exits and mpirun stops the job); an MPI_Init
// that does not return ends the process (status 1) with the reason on stderr, since
// nothing can interrupt it.
void mpi_broadcast_from_rank0(std::span<std::byte> blob, int rank, int world, double timeout_seconds);

}  // namespace strata::dist
