#pragma once
// The multi-tensor optimizer steps against the single ones on one backend. A list of
// parameters in every layout a model gives them (contiguous, channels-last, a transposed
// view, an empty tensor, a scalar) and more of them than one cuda launch takes, stepped
// by multi_sgd_step / multi_adam_step, must give bitwise what sgd_step / adam_step give
// each parameter: with and without graph mode's device hyperparameters, with loss
// scaling's state (a step taken, a step skipped), SGD with and without momentum.
#include <functional>

#include "strata/backends/api/backend.h"
#include "strata/core/tensor.h"

namespace strata::testing {

// `place` puts a host tensor on the backend's device in the same memory format (the
// identity for a CPU backend).
void expect_multi_steps_match_single_steps(backends::Backend& b, const std::function<Tensor(const Tensor&)>& place);
// The same for RMSprop, Adagrad and Adadelta in each of adaptive_cases()'s configurations.
void expect_adaptive_multi_steps_match_single_steps(backends::Backend& b,
                                                    const std::function<Tensor(const Tensor&)>& place);

}  // namespace strata::testing
