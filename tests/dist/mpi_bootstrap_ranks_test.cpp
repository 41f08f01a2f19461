// The MPI transport of NCCL's unique id between real processes: every test here runs in
// a job of its own, `mpirun -np 2 ... --gtest_filter=<one test>` (tests/dist/CMakeLists.txt),
// since MPI can be initialised once per process. Needs no GPU, CUDA or NCCL.
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <thread>

#include "strata/dist/bootstrap.h"
#include "strata/dist/mpi_bootstrap.h"
#include "support/expect_error.h"

namespace strata::dist {
namespace {

std::array<std::byte, 128> pattern(int seed) {
  std::array<std::byte, 128> b;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>((i * 151 + 7 * static_cast<size_t>(seed)) % 256);
  return b;
}

RankInfo two_ranks() {
  const std::optional<RankInfo> info = rank_from_env();
  if (!info || info->world != 2) {
    ADD_FAILURE() << "run under mpirun -np 2 (OMPI_COMM_WORLD_SIZE is not 2)";
    return {};
  }
  return *info;
}

// A rank that never reaches the exchange: the other must give up on its own.
void stand_still() { std::this_thread::sleep_for(std::chrono::seconds(60)); }

TEST(MpiBootstrapRanks, StrataOwnsMpi) {
  const RankInfo info = two_ranks();
  ASSERT_EQ(info.world, 2);
  ASSERT_FALSE(mpi_was_initialized());
  std::array<std::byte, 128> blob = info.rank == 0 ? pattern(1) : pattern(2);
  EXPECT_EQ(share_from_rank0(blob, info, "", 60.0), IdTransport::mpi);
  EXPECT_EQ(blob, pattern(1)) << "rank " << info.rank << " holds other bytes than rank 0 sent";
  EXPECT_TRUE(mpi_was_initialized());
  int finalized = 0;
  MPI_Finalized(&finalized);
  EXPECT_TRUE(finalized) << "strata initialised MPI, so it must have finalised it";
  EXPECT_STRATA_ERROR(share_from_rank0(blob, info, "", 60.0), "rank ", "MPI was finalised already",
                      "needs an id file, or a program that calls MPI_Init itself");
}

TEST(MpiBootstrapRanks, ProgramOwnsMpi) {
  const RankInfo info = two_ranks();
  ASSERT_EQ(info.world, 2);
  ASSERT_EQ(MPI_Init(nullptr, nullptr), MPI_SUCCESS);
  for (int round = 1; round <= 2; ++round) {
    std::array<std::byte, 128> blob = info.rank == 0 ? pattern(round) : std::array<std::byte, 128>{};
    EXPECT_EQ(share_from_rank0(blob, info, "", 60.0), IdTransport::mpi);
    EXPECT_EQ(blob, pattern(round)) << "round " << round << ", rank " << info.rank;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  EXPECT_FALSE(finalized) << "the program initialised MPI, so strata must leave it alone";
  EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(MPI_Finalize(), MPI_SUCCESS);
}

TEST(MpiBootstrapRanks, SizesOtherThanNcclsId) {
  const RankInfo info = two_ranks();
  ASSERT_EQ(info.world, 2);
  ASSERT_EQ(MPI_Init(nullptr, nullptr), MPI_SUCCESS);
  std::array<std::byte, 1> one{info.rank == 0 ? std::byte{0x5a} : std::byte{0}};
  share_from_rank0(one, info, "", 60.0);
  EXPECT_EQ(one[0], std::byte{0x5a});
  std::array<std::byte, 0> none{};
  share_from_rank0(none, info, "", 60.0);
  EXPECT_EQ(MPI_Finalize(), MPI_SUCCESS);
}

// Rank 0 has MPI but never broadcasts: rank 1's broadcast must end in an error within its
// timeout. Rank 1 then exits with MPI unfinalised, and mpirun stops rank 0: the ctest entry
// reads rank 1's line, not the job's status.
TEST(MpiBootstrapRanks, AbsentBroadcastTimesOut) {
  const RankInfo info = two_ranks();
  ASSERT_EQ(info.world, 2);
  ASSERT_EQ(MPI_Init(nullptr, nullptr), MPI_SUCCESS);
  if (info.rank == 0) stand_still();
  std::array<std::byte, 128> blob{};
  const auto t0 = std::chrono::steady_clock::now();
  try {
    share_from_rank0(blob, info, "", 1.0);
    ADD_FAILURE() << "rank 1 received an id nobody sent";
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 10.0);
    std::printf("rank 1 gave up as expected after %.1f s: %s\n", s, e.what());
    std::fflush(stdout);
  }
}

// Rank 0 never starts MPI: rank 1 is held in MPI_Init, which nothing interrupts, so strata
// ends the process within the timeout (status 1, the reason on stderr).
TEST(MpiBootstrapRanks, AbsentRankEndsMpiInit) {
  const RankInfo info = two_ranks();
  ASSERT_EQ(info.world, 2);
  if (info.rank == 0) stand_still();
  std::array<std::byte, 128> blob{};
  share_from_rank0(blob, info, "", 1.0);
  ADD_FAILURE() << "MPI_Init returned although rank 0 never called it";
}

}  // namespace
}  // namespace strata::dist
