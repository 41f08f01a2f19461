#pragma once
// Argument checks shared by the front end and direct-mode plans. Each names the op
// and the argument and prints the offending shapes/dtypes/devices.
#include <string_view>

#include "strata/core/tensor.h"

namespace strata::ops {

void check_defined(std::string_view op, std::string_view arg, const Tensor& t);
void check_rank(std::string_view op, std::string_view arg, const Tensor& t, int rank);
void check_float(std::string_view op, std::string_view arg, const Tensor& t);
void check_dtype(std::string_view op, std::string_view arg, const Tensor& t, DType want);
void check_same_dtype(std::string_view op, std::string_view a_name, const Tensor& a, std::string_view b_name,
                      const Tensor& b);
void check_same_shape(std::string_view op, std::string_view a_name, const Tensor& a, std::string_view b_name,
                      const Tensor& b);
void check_device(std::string_view op, std::string_view arg, const Tensor& t, Device d, std::string_view backend);
// A [C] vector argument (bias, BN parameters).
void check_vector(std::string_view op, std::string_view arg, const Tensor& t, int64_t c, const Tensor& like);

}  // namespace strata::ops
