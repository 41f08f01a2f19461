#include "strata/core/random.h"

#include <cmath>
#include <numbers>

#include "strata/core/error.h"

namespace strata {

void Generator::manual_seed(uint64_t seed) {
  gen_.seed(seed);
  seed_ = seed;
  spare_ = 0.0;
  has_spare_ = false;
}

double Generator::uniform_bits(int bits) {
  STRATA_CHECK(bits >= 1 && bits <= 53, "Generator::uniform_bits: bits must be in [1, 53], got ", bits);
  return static_cast<double>(gen_() >> (64 - bits)) * std::ldexp(1.0, -bits);
}

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Box-Muller; 1 - u keeps the logarithm finite.
  const double u1 = 1.0 - uniform(), u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(a);
  has_spare_ = true;
  return r * std::cos(a);
}

int64_t Generator::integer(int64_t lo, int64_t hi) {
  STRATA_CHECK(lo < hi, "Generator::integer: needs low < high, got [", lo, ", ", hi, ")");
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + uniform_below(gen_, range));
}

Generator& default_generator() {
  static Generator g;
  return g;
}

std::mutex& default_generator_mutex() {
  static std::mutex m;
  return m;
}

void manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(default_generator_mutex());
  default_generator().manual_seed(seed);
}

}  // namespace strata
