#include "examples/train/checkpoint_meta.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "strata/core/error.h"

namespace strata::train {

CheckpointMeta::CheckpointMeta(const std::map<std::string, std::string>& metadata, std::string path)
    : m_(metadata), path_(std::move(path)) {}

const std::string& CheckpointMeta::text(const std::string& key) const {
  auto it = m_.find(key);
  STRATA_CHECK(it != m_.end(), "checkpoint '", path_, "' lacks metadata '", key,
               "' (not written by strata_train, or by an older version)");
  return it->second;
}

void CheckpointMeta::fail(const std::string& key, const std::string& why) const {
  auto it = m_.find(key);
  STRATA_FAIL("checkpoint '", path_, "': metadata '", key, "'", it == m_.end() ? "" : " = '" + it->second + "'", " ",
              why);
}

int64_t CheckpointMeta::integer(const std::string& key, int64_t lo, int64_t hi) const {
  const std::string& s = text(key);
  const bool digits = !s.empty() && s.find_first_not_of("0123456789", s[0] == '-' ? 1 : 0) == std::string::npos &&
                      s != "-";
  errno = 0;
  const long long v = digits ? std::strtoll(s.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE || v < lo || v > hi)
    fail(key, "is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

uint64_t CheckpointMeta::unsigned_integer(const std::string& key) const {
  const std::string& s = text(key);
  const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) fail(key, "is not an integer in [0, 18446744073709551615]");
  return v;
}

double CheckpointMeta::real(const std::string& key, double lo, double hi) const {
  const std::string& s = text(key);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi)
    fail(key, "is not a finite number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

const std::string& CheckpointMeta::one_of(const std::string& key, std::initializer_list<const char*> words) const {
  const std::string& s = text(key);
  std::string list;
  for (const char* w : words) {
    if (s == w) return s;
    list += (list.empty() ? "" : ", ") + std::string(w);
  }
  fail(key, "is not one of " + list);
}

}  // namespace strata::train
