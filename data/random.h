#pragma once
// Deterministic randomness for the loader. Only std::mt19937_64's raw output is used:
// std::shuffle and std::uniform_*_distribution are implementation-defined, so using
// them would make "same seed, same batches" depend on the standard library.
#include <cstdint>
#include <random>
#include <vector>

#include "strata/core/random.h"  // uniform01, uniform_below

namespace strata::data {

// SplitMix64 finaliser: a bijective 64-bit mix (Steele, Lea, Flood 2014).
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One seed from several words (order matters).
constexpr uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0) {
  return splitmix64(splitmix64(splitmix64(a) ^ b) ^ c);
}

// A random permutation of 0..n-1 (Fisher-Yates).
inline std::vector<int64_t> random_permutation(int64_t n, std::mt19937_64& rng) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[uniform_below(rng, static_cast<uint64_t>(i) + 1)]);
  return p;
}

}  // namespace strata::data
