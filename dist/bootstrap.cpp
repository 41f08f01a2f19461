#include "strata/dist/bootstrap.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "strata/core/error.h"
#include "strata/dist/mpi_bootstrap.h"

namespace strata::dist {

namespace {

using Clock = std::chrono::steady_clock;

// Rank 0's side: the bytes under a temporary name, then renamed, so a reader sees all of
// them or nothing.
void write_blob(const std::string& path, std::span<const std::byte> blob) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    STRATA_CHECK(f.good(), "dist: rank 0 cannot write the unique id to '", tmp, "' (", kIdFileVar, ")");
    f.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    STRATA_CHECK(f.good(), "dist: rank 0 cannot write the unique id to '", tmp, "' (", kIdFileVar, ")");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  STRATA_CHECK(!ec, "dist: rank 0 cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

void read_blob(const std::string& path, std::span<std::byte> blob, int rank, double timeout_seconds) {
  const auto t0 = Clock::now();
  while (true) {
    std::ifstream f(path, std::ios::binary);
    if (f.good()) {
      f.read(reinterpret_cast<char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
      const std::streamsize got = f.gcount();
      const bool more = f.peek() != std::ifstream::traits_type::eof();
      STRATA_CHECK(got == static_cast<std::streamsize>(blob.size()) && !more, "dist: rank ", rank, ": '", path,
                   "' holds ", more ? "more than " : "", got, " bytes, not the ", blob.size(),
                   "-byte unique id rank 0 writes");
      return;
    }
    STRATA_CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < timeout_seconds, "dist: rank ", rank,
                 ": rank 0 wrote no unique id to '", path, "' within ", timeout_seconds, " s (did rank 0 start? is ",
                 kIdFileVar, " the same path for all ranks?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

const char* id_transport_name(IdTransport t) {
  switch (t) {
    case IdTransport::none: return "none";
    case IdTransport::file: return "file";
    case IdTransport::mpi: return "mpi";
  }
  return "?";
}

bool started_by_mpirun(const EnvLookup& lookup) {
  const char* size = lookup ? lookup("OMPI_COMM_WORLD_SIZE") : std::getenv("OMPI_COMM_WORLD_SIZE");
  return size != nullptr;
}

IdTransport choose_id_transport(const RankInfo& info, const std::string& id_file, const EnvLookup& env) {
  if (info.world == 1) return IdTransport::none;
  if (!id_file.empty()) return IdTransport::file;
  const bool mpirun = started_by_mpirun(env);
  if (mpirun && mpi_built()) return IdTransport::mpi;
  STRATA_FAIL("dist: rank ", info.rank, " of ", info.world, ": no way to pass NCCL's unique id from rank 0: set ",
              kIdFileVar, " to a path every rank can reach, or start the job with strata_train --nproc (one machine)",
              mpi_built() ? ", or with mpirun (this build passes the id over MPI)"
                          : std::string(", or build strata with MPI (STRATA_WITH_MPI; Debian: libopenmpi-dev "
                                        "openmpi-bin) and start the job with mpirun") +
                                (mpirun ? " (this job was started by mpirun, but this build has no MPI)" : ""));
}

IdTransport share_from_rank0(std::span<std::byte> blob, const RankInfo& info, const std::string& id_file,
                             double timeout_seconds, const EnvLookup& env) {
  STRATA_CHECK(timeout_seconds > 0, "dist: the timeout must be positive, got ", timeout_seconds, " s");
  const IdTransport how = choose_id_transport(info, id_file, env);
  switch (how) {
    case IdTransport::none: break;
    case IdTransport::file:
      if (info.rank == 0)
        write_blob(id_file, blob);
      else
        read_blob(id_file, blob, info.rank, timeout_seconds);
      break;
    case IdTransport::mpi: mpi_broadcast_from_rank0(blob, info.rank, info.world, timeout_seconds); break;
  }
  return how;
}

}  // namespace strata::dist
