#include <gtest/gtest.h>

#include <map>
#include <string>

#include "strata/core/error.h"
#include "strata/dist/rank_env.h"

namespace strata::dist {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    rank_from_env(env_of(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RankEnv, NoLauncherMeansOneProcess) { EXPECT_FALSE(rank_from_env(env_of({})).has_value()); }

TEST(RankEnv, TorchrunVariables) {
  const auto r = rank_from_env(env_of({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world, 8);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->local_world, 2);
  EXPECT_EQ(r->source, "RANK/WORLD_SIZE");
}

TEST(RankEnv, OpenMpiVariables) {
  const auto r = rank_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "6"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 5);
  EXPECT_EQ(r->world, 6);
  EXPECT_EQ(r->local_rank, 2);
  EXPECT_EQ(r->local_world, 3);
  EXPECT_EQ(r->source, "OMPI_COMM_WORLD_*");
}

TEST(RankEnv, RankWinsOverOpenMpi) {
  const auto r = rank_from_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"},
                                       {"OMPI_COMM_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->world, 2);
}

TEST(RankEnv, MissingLocalVariablesMeanOneMachine) {
  const auto r = rank_from_env(env_of({{"RANK", "2"}, {"WORLD_SIZE", "4"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->local_world, 4);
  EXPECT_EQ(r->local_rank, 2);
}

TEST(RankEnv, BadValuesNameTheVariable) {
  EXPECT_NE(error_of({{"RANK", "abc"}, {"WORLD_SIZE", "2"}}).find("RANK is 'abc', not an integer"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK is 2, outside 0..WORLD_SIZE-1 = 0..1"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}).find("RANK is -1"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE is 0"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}).find("WORLD_SIZE is '2x', not an integer"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}}).find("RANK is set but WORLD_SIZE is not"), std::string::npos);
  EXPECT_NE(error_of({{"WORLD_SIZE", "2"}}).find("WORLD_SIZE is set but RANK is not"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}})
                .find("LOCAL_RANK is 2"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}}).find("LOCAL_WORLD_SIZE is 3"),
            std::string::npos);
  EXPECT_NE(error_of({{"OMPI_COMM_WORLD_RANK", "7"}, {"OMPI_COMM_WORLD_SIZE", "4"}}).find("OMPI_COMM_WORLD_RANK is 7"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", ""}, {"WORLD_SIZE", "2"}}).find("RANK is empty"), std::string::npos);
}

TEST(RankEnv, DeviceForRank) {
  RankInfo r;
  r.rank = r.local_rank = 1;
  r.world = r.local_world = 2;
  EXPECT_EQ(device_for_rank(r, nullptr), "1");
  EXPECT_EQ(device_for_rank(r, ""), "1");
  EXPECT_EQ(device_for_rank(r, "4,6"), "6");
  EXPECT_EQ(device_for_rank(r, "GPU-abc,GPU-def"), "GPU-def");
  EXPECT_EQ(device_for_rank(r, "3"), "3");  // already narrowed by the launcher
  r.local_rank = 2;
  r.local_world = 3;
  try {
    device_for_rank(r, "0,1");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES is '0,1' (2 GPU(s)) but this process has local rank 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace strata::dist
