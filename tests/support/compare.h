#pragma once
#include <gtest/gtest.h>

#include "strata/core/tensor.h"

namespace strata::testing {

// ||a - b|| / max(||b||, tiny) over all elements, computed in double.
double relative_error(const Tensor& a, const Tensor& b);
// Largest |a - b| elementwise.
double max_abs_diff(const Tensor& a, const Tensor& b);
// Bitwise equality of the values (same dtype and sizes; strides may differ).
::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b);
// Relative error at most `tol`, with a message naming the shapes and the error.
::testing::AssertionResult close(const Tensor& a, const Tensor& b, double tol);

}  // namespace strata::testing
