#pragma once
// What the data-parallel benchmarks' --record files say of a tensor (dist_resnet, gpt2_dist): the
// sum and the L1 norm of its values read as floats, in order.
#include <array>
#include <cmath>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::bench {

inline std::array<double, 2> sum_and_l1(const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  double sum = 0, abs = 0;
  for (float f : v) sum += f, abs += std::fabs(f);
  return {sum, abs};
}

}  // namespace strata::bench
