#include "support/random.h"

#include <random>
#include <vector>

namespace strata::testing {

Tensor random_tensor(const Shape& sizes, DType dt, uint64_t seed, double lo, double hi, MemoryFormat fmt) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(sizes.numel()));
  for (double& x : v) x = dist(gen);
  Tensor src = Tensor::from_vector(v, sizes);
  Tensor out = Tensor::empty(sizes, dt, Device::cpu(), fmt);
  copy_into(src, out);
  return out;
}

Tensor random_labels(int64_t n, int64_t classes, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, classes - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_vector(v, {n});
}

Tensor labels_with_ignored(int64_t n, int64_t classes, uint64_t seed, int64_t every, int64_t ignore_index) {
  std::vector<int64_t> v = random_labels(n, classes, seed).to_vector<int64_t>();
  for (int64_t i = 0; i < n; i += every) v[static_cast<size_t>(i)] = ignore_index;
  return Tensor::from_vector(v, {n});
}

}  // namespace strata::testing
