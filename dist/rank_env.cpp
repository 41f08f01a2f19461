#include "strata/dist/rank_env.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "strata/core/error.h"

namespace strata::dist {

namespace {

// An integer in [lo, hi] from variable `name`, or an error naming it and the range.
int parse_int(const char* name, const char* value, long lo, long hi, const std::string& range) {
  STRATA_CHECK(value != nullptr && *value != '\0', "environment: ", name, " is empty; expected an integer in ", range);
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  STRATA_CHECK(errno == 0 && *end == '\0' && end != value, "environment: ", name, " is '", value,
               "', not an integer; expected one in ", range);
  STRATA_CHECK(v >= lo && v <= hi, "environment: ", name, " is ", v, ", outside ", range);
  return static_cast<int>(v);
}

// Data-parallel jobs beyond this many ranks are not a target; the bound catches garbage.
constexpr long kMaxWorld = 1 << 20;

std::optional<RankInfo> from_vars(const EnvLookup& env, const char* rank_var, const char* world_var,
                                  const char* local_rank_var, const char* local_world_var, const char* source) {
  const char* rank = env(rank_var);
  const char* world = env(world_var);
  if (!rank && !world) return std::nullopt;
  STRATA_CHECK(rank && world, "environment: ", rank ? rank_var : world_var, " is set but ", rank ? world_var : rank_var,
               " is not; a launcher sets both (", source, ")");
  RankInfo r;
  r.source = source;
  r.world = parse_int(world_var, world, 1, kMaxWorld, "1.." + std::to_string(kMaxWorld));
  r.rank = parse_int(rank_var, rank, 0, r.world - 1, "0..WORLD_SIZE-1 = 0.." + std::to_string(r.world - 1));
  // torchrun and mpirun always set the local variables; a hand-set RANK/WORLD_SIZE without
  // them usually means one machine, so the whole job is taken to be local.
  const char* lw = env(local_world_var);
  r.local_world = lw ? parse_int(local_world_var, lw, 1, r.world, "1.." + std::to_string(r.world)) : r.world;
  const char* lr = env(local_rank_var);
  r.local_rank = lr ? parse_int(local_rank_var, lr, 0, r.local_world - 1,
                                std::string("0..") + local_world_var + "-1 = 0.." + std::to_string(r.local_world - 1))
                    : r.rank % r.local_world;
  return r;
}

}  // namespace

std::optional<RankInfo> rank_from_env(const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* n) -> const char* { return std::getenv(n); });
  if (auto r = from_vars(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK/WORLD_SIZE")) return r;
  return from_vars(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_*");
}

std::string device_for_rank(const RankInfo& r, const char* visible) {
  if (!visible || !*visible) return std::to_string(r.local_rank);
  std::vector<std::string> ids;
  std::string cur;
  for (const char* p = visible;; ++p) {
    if (*p == ',' || *p == '\0') {
      ids.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  if (ids.size() == 1) return ids.front();
  STRATA_CHECK(static_cast<size_t>(r.local_rank) < ids.size(), "environment: CUDA_VISIBLE_DEVICES is '", visible,
               "' (", ids.size(), " GPU(s)) but this process has local rank ", r.local_rank,
               ": one GPU per process is needed");
  return ids[static_cast<size_t>(r.local_rank)];
}

}  // namespace strata::dist
