#pragma once
// Generator: strata's seeded random source on the host, for tensor factories
// (core/factories.h) and parameter initialisation (nn/init.h). One std::mt19937_64
// with strata's own transforms, not <random>'s distributions, whose algorithms differ
// between standard libraries: the same seed gives the same values with every
// compiler, on every backend and in every dispatch mode.
//  - uniform(): [0, 1) from the top 53 bits of one draw;
//  - uniform_bits(b): [0, 1) on a grid of 2^-b from the top b bits (b = 24 for f32,
//    so the value is exact in the target dtype and never rounds up to 1);
//  - normal(): standard normals by Box-Muller, in pairs (the cosine value, then the
//    sine value of one pair of uniforms);
//  - integer(lo, hi): uniform in [lo, hi) by rejection (no modulo bias).
//
// A Generator is not synchronised: use one per thread. The process's default
// generator (default_generator()) is shared; the library's own draws from it (the
// factories called without a generator, layer constructors) hold
// default_generator_mutex() for the duration of one tensor's draws.
#include <cstdint>
#include <mutex>
#include <random>

namespace strata {

// The transforms on a raw engine (the data loader keeps engines of its own).
// Uniform double in [0, 1) with 53 random bits.
inline double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
// Uniform integer in [0, n), n > 0, by rejection (no modulo bias).
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // values >= limit would bias
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return x % n;
}

class Generator {
 public:
  // The default generator's seed at start-up, as torch's default CPU generator starts
  // from a fixed seed: a program that never seeds is still reproducible.
  static constexpr uint64_t kDefaultSeed = 0;

  explicit Generator(uint64_t seed = kDefaultSeed) { manual_seed(seed); }
  // Restarts the sequence (also drops a pending Box-Muller value).
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }

  uint64_t next_u64() { return gen_(); }
  double uniform() { return uniform01(gen_); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double uniform_bits(int bits);  // 1 <= bits <= 53
  double normal();
  int64_t integer(int64_t lo, int64_t hi);  // lo < hi

 private:
  std::mt19937_64 gen_;
  uint64_t seed_ = kDefaultSeed;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// The process's generator, used by factories and layer constructors when they are
// given none. Hold default_generator_mutex() while drawing from it when other threads
// may draw too.
Generator& default_generator();
std::mutex& default_generator_mutex();
// Reseeds the default generator (under its mutex), as torch::manual_seed.
void manual_seed(uint64_t seed);

// Runs fn(generator): `gen` itself, or the default generator under its mutex.
template <class Fn>
decltype(auto) with_generator(Generator* gen, Fn&& fn) {
  if (gen != nullptr) return fn(*gen);
  std::lock_guard<std::mutex> lock(default_generator_mutex());
  return fn(default_generator());
}

}  // namespace strata
