// The unique-id exchange of dist/bootstrap.h in one process: which transport a rank
// picks, the file transport with rank 1 on a thread, and that nothing here touches MPI
// unless mpirun started the process. The MPI transport itself runs under mpirun in
// mpi_bootstrap_ranks_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "strata/dist/bootstrap.h"
#include "strata/dist/mpi_bootstrap.h"
#include "support/expect_error.h"

namespace strata::dist {
namespace {

namespace fs = std::filesystem;

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

const std::map<std::string, std::string> kMpirun = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
const std::map<std::string, std::string> kTorchrun = {{"RANK", "1"}, {"WORLD_SIZE", "2"}};

RankInfo rank_of(int rank, int world) {
  RankInfo r;
  r.rank = r.local_rank = rank;
  r.world = r.local_world = world;
  return r;
}

// Every byte value, NCCL's id size: a transport that stops at a zero or mangles high bytes shows.
std::array<std::byte, 128> pattern() {
  std::array<std::byte, 128> b;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>((i * 151 + 7) % 256);
  return b;
}

struct TempDir {
  TempDir() {
    std::string t = (fs::temp_directory_path() / "strata-bootstrap-test-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

TEST(Bootstrap, OneRankExchangesNothing) {
  EXPECT_EQ(choose_id_transport(rank_of(0, 1), "", env_of(kMpirun)), IdTransport::none);
  auto blob = pattern();
  EXPECT_EQ(share_from_rank0(blob, rank_of(0, 1), "", 1.0, env_of({})), IdTransport::none);
  EXPECT_EQ(blob, pattern());
}

TEST(Bootstrap, AnIdFileWinsOverMpi) {
  EXPECT_EQ(choose_id_transport(rank_of(1, 2), "/shared/id", env_of(kMpirun)), IdTransport::file);
  EXPECT_EQ(choose_id_transport(rank_of(1, 2), "/shared/id", env_of(kTorchrun)), IdTransport::file);
}

TEST(Bootstrap, MpirunWithoutIdFileUsesMpiWhenBuilt) {
  EXPECT_TRUE(started_by_mpirun(env_of(kMpirun)));
  EXPECT_FALSE(started_by_mpirun(env_of(kTorchrun)));
  if (mpi_built()) {
    EXPECT_EQ(choose_id_transport(rank_of(1, 2), "", env_of(kMpirun)), IdTransport::mpi);
  } else {
    EXPECT_STRATA_ERROR(choose_id_transport(rank_of(1, 2), "", env_of(kMpirun)), "rank 1 of 2",
                        "no way to pass NCCL's unique id", kIdFileVar, "build strata with MPI (STRATA_WITH_MPI",
                        "libopenmpi-dev", "this job was started by mpirun, but this build has no MPI");
  }
}

TEST(Bootstrap, NoIdFileOutsideMpirunSaysHowToGetOne) {
  // torchrun's job: MPI, even when built, is not the launcher, so it is not used.
  if (mpi_built()) {
    EXPECT_STRATA_ERROR(choose_id_transport(rank_of(1, 2), "", env_of(kTorchrun)), "rank 1 of 2",
                        "no way to pass NCCL's unique id", kIdFileVar, "strata_train --nproc",
                        "or with mpirun (this build passes the id over MPI)");
  } else {
    EXPECT_STRATA_ERROR(choose_id_transport(rank_of(1, 2), "", env_of(kTorchrun)), "rank 1 of 2", kIdFileVar,
                        "strata_train --nproc", "build strata with MPI (STRATA_WITH_MPI",
                        "and start the job with mpirun");
  }
}

TEST(Bootstrap, FileCarriesRankZeroBytesExactly) {
  TempDir dir;
  const std::string id_file = dir.path + "/id";
  std::array<std::byte, 128> received{};
  IdTransport rank1_how = IdTransport::none;
  // Rank 1 starts waiting first: the file appears while it polls.
  std::thread rank1([&] { rank1_how = share_from_rank0(received, rank_of(1, 2), id_file, 30.0, env_of({})); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto sent = pattern();
  EXPECT_EQ(share_from_rank0(sent, rank_of(0, 2), id_file, 30.0, env_of({})), IdTransport::file);
  rank1.join();
  EXPECT_EQ(rank1_how, IdTransport::file);
  EXPECT_EQ(received, pattern());
  EXPECT_EQ(sent, pattern());
  EXPECT_EQ(fs::file_size(id_file), 128u);
}

TEST(Bootstrap, FileOfAnotherSizeIsAnError) {
  TempDir dir;
  const std::string id_file = dir.path + "/id";
  std::ofstream(id_file) << "abc";
  std::array<std::byte, 128> blob{};
  EXPECT_STRATA_ERROR(share_from_rank0(blob, rank_of(1, 2), id_file, 1.0, env_of({})), "rank 1", id_file.c_str(),
                      "holds 3 bytes, not the 128-byte unique id");
  std::ofstream(id_file) << std::string(200, 'x');
  EXPECT_STRATA_ERROR(share_from_rank0(blob, rank_of(1, 2), id_file, 1.0, env_of({})),
                      "holds more than 128 bytes, not the 128-byte unique id");
}

TEST(Bootstrap, MissingFileTimesOutNamingIt) {
  TempDir dir;
  const std::string id_file = dir.path + "/never";
  std::array<std::byte, 128> blob{};
  EXPECT_STRATA_ERROR(share_from_rank0(blob, rank_of(1, 2), id_file, 0.2, env_of({})), "rank 1",
                      "rank 0 wrote no unique id to", id_file.c_str(), "within 0.2 s", kIdFileVar);
}

TEST(Bootstrap, BadTimeoutIsAnError) {
  std::array<std::byte, 128> blob{};
  EXPECT_STRATA_ERROR(share_from_rank0(blob, rank_of(0, 2), "/x", 0.0, env_of({})), "timeout must be positive");
}

// A process that mpirun did not start (one rank, torchrun's or --nproc's job, any id file,
// any failure) must not initialise MPI: Open MPI would start a singleton job of its own.
TEST(Bootstrap, WithoutMpirunMpiIsNeverTouched) {
  ASSERT_FALSE(mpi_was_initialized());
  TempDir dir;
  auto blob = pattern();
  share_from_rank0(blob, rank_of(0, 1), "", 1.0, env_of({}));
  share_from_rank0(blob, rank_of(0, 1), "", 1.0, env_of(kMpirun));
  share_from_rank0(blob, rank_of(0, 2), dir.path + "/id", 1.0, env_of(kTorchrun));
  share_from_rank0(blob, rank_of(0, 2), dir.path + "/id2", 1.0, env_of(kMpirun));  // the file wins
  EXPECT_THROW(share_from_rank0(blob, rank_of(1, 2), "", 1.0, env_of(kTorchrun)), Error);
  EXPECT_THROW(share_from_rank0(blob, rank_of(0, 2), "", 1.0, env_of({})), Error);
  EXPECT_FALSE(mpi_was_initialized());
}

}  // namespace
}  // namespace strata::dist
