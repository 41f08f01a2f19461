#pragma once
// The consumer's own core/tensor.h, on its include path beside strata's: strata's headers must never
// pick it up in place of their own (they are included as "strata/core/...").
namespace consumer {
struct Tensor {
  int rank = 0;
};
}  // namespace consumer
