#pragma once
// Finite-difference check of backward formulas: compares the gradients backward()
// produces for f's inputs against central differences, in f64 on the CPU.
#include <functional>
#include <string>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::autograd {

struct GradcheckOptions {
  double eps = 1e-6;   // perturbation
  double atol = 1e-7;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0.0;
  std::string report;  // the first mismatches, naming input and element
};

// `f` maps the inputs to a one-element tensor using differentiable ops. Inputs must
// be dense f64 CPU tensors; those with requires_grad() are checked.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& o = {});

}  // namespace strata::autograd
