#include "strata/dist/mpi_bootstrap.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "strata/core/error.h"

namespace strata::dist {

namespace {

using Clock = std::chrono::steady_clock;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int code, const char* call, const std::string& who) {
  STRATA_CHECK(code == MPI_SUCCESS, who, ": ", call, " failed: ", mpi_error_string(code));
}

// Open MPI's MPI_Init waits for every rank of the job (it exchanges their addresses), and
// nothing can interrupt it: a rank that never gets there would hold the others forever. A
// guard thread ends the process instead, and mpirun then stops the job.
void init_bounded(double timeout_seconds, const std::string& who) {
  std::mutex mu;
  std::condition_variable cv;
  bool returned = false;
  std::thread guard([&] {
    std::unique_lock lk(mu);
    if (!cv.wait_for(lk, std::chrono::duration<double>(timeout_seconds), [&] { return returned; })) {
      std::fprintf(stderr,
                   "%s: MPI_Init did not return within %g s (it waits for every rank of the job: one did not start, "
                   "or hangs before its process group); the process stops here\n",
                   who.c_str(), timeout_seconds);
      std::fflush(stderr);
      std::_Exit(1);
    }
  });
  const int code = MPI_Init(nullptr, nullptr);
  {
    std::lock_guard lk(mu);
    returned = true;
  }
  cv.notify_all();
  guard.join();
  check_mpi(code, "MPI_Init", who);
}

// Polls a non-blocking collective, so that a rank that never joins it ends in an error,
// not a hang (MPI_Bcast itself has no timeout).
void wait_bounded(MPI_Request& request, const char* what, Clock::time_point deadline, double timeout_seconds,
                  const std::string& who) {
  while (true) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", who);
    if (done) return;
    STRATA_CHECK(Clock::now() < deadline, who, ": ", what, " did not complete within ", timeout_seconds,
                 " s: a rank did not reach it (did rank 0 start? does every rank build its process group?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// MPI errors on MPI_COMM_WORLD as return codes (they abort the job by default), so they
// become strata::Errors; the program's own handler is put back afterwards.
class ErrorsReturn {
 public:
  ErrorsReturn() {
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &previous_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~ErrorsReturn() { restore(); }
  ErrorsReturn(const ErrorsReturn&) = delete;
  ErrorsReturn& operator=(const ErrorsReturn&) = delete;
  void restore() {
    if (previous_ == MPI_ERRHANDLER_NULL) return;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, previous_);
    MPI_Errhandler_free(&previous_);
  }

 private:
  MPI_Errhandler previous_ = MPI_ERRHANDLER_NULL;
};

}  // namespace

bool mpi_built() { return true; }

bool mpi_was_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

void mpi_broadcast_from_rank0(std::span<std::byte> blob, int rank, int world, double timeout_seconds) {
  const std::string who = "dist: rank " + std::to_string(rank) + " of " + std::to_string(world) + " (MPI bootstrap)";
  STRATA_CHECK(timeout_seconds > 0, who, ": the timeout must be positive, got ", timeout_seconds, " s");
  STRATA_CHECK(blob.size() <= static_cast<size_t>(INT_MAX), who, ": ", blob.size(),
               " bytes are more than one MPI_Bcast of MPI_BYTE carries (", INT_MAX, ")");
  int finalized = 0;
  MPI_Finalized(&finalized);
  STRATA_CHECK(!finalized, who, ": MPI was finalised already in this process (strata finalises the MPI it "
               "initialised once the unique id has arrived, and MPI cannot be initialised twice); a second process "
               "group in one process needs an id file, or a program that calls MPI_Init itself");
  const bool own = !mpi_was_initialized();
  if (own) init_bounded(timeout_seconds, who);

  int mpi_rank = -1, mpi_world = -1;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank), "MPI_Comm_rank", who);
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &mpi_world), "MPI_Comm_size", who);
  STRATA_CHECK(mpi_rank == rank && mpi_world == world, who, ": MPI_COMM_WORLD makes this process rank ", mpi_rank,
               " of ", mpi_world, ", but the launcher's variables say rank ", rank, " of ", world,
               "; MPI's rank 0 sends the id, so they must agree (start the job with one mpirun, without RANK or "
               "WORLD_SIZE of another launcher)");

  ErrorsReturn errors_return;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds));
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(blob.data(), static_cast<int>(blob.size()), MPI_BYTE, 0, MPI_COMM_WORLD, &request),
            "MPI_Ibcast", who);
  wait_bounded(request, "the broadcast of rank 0's unique id (MPI_Ibcast)", deadline, timeout_seconds, who);
  if (!own) return;
  // Open MPI's MPI_Finalize is a fence over all ranks. Left to the exit of the process, it
  // would wait there for a peer that hangs later, and mpirun stops a job only once one of
  // its ranks has exited: the job would hang. Finalised now, after a barrier that shows
  // every rank holds the id and is on its way here; once finalised, a failing rank exits,
  // and mpirun stops the others.
  check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier", who);
  wait_bounded(request, "the barrier after the broadcast of the unique id (MPI_Ibarrier)", deadline, timeout_seconds,
               who);
  errors_return.restore();
  check_mpi(MPI_Finalize(), "MPI_Finalize", who);
}

}  // namespace strata::dist
