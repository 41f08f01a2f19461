#include "strata/ops/checks.h"

namespace strata::ops {

void check_defined(std::string_view op, std::string_view arg, const Tensor& t) {
  STRATA_CHECK(t.defined(), op, ": argument '", arg, "' is an undefined tensor");
}

void check_rank(std::string_view op, std::string_view arg, const Tensor& t, int rank) {
  check_defined(op, arg, t);
  STRATA_CHECK(t.dim() == rank, op, ": ", arg, " must have rank ", rank, ", got ", t.str());
}

void check_float(std::string_view op, std::string_view arg, const Tensor& t) {
  check_defined(op, arg, t);
  STRATA_CHECK(is_floating(t.dtype()), op, ": ", arg, " must be a floating tensor, got ", t.str());
}

void check_dtype(std::string_view op, std::string_view arg, const Tensor& t, DType want) {
  check_defined(op, arg, t);
  STRATA_CHECK(t.dtype() == want, op, ": ", arg, " must be ", dtype_name(want), ", got ", t.str());
}

void check_same_dtype(std::string_view op, std::string_view a_name, const Tensor& a, std::string_view b_name,
                      const Tensor& b) {
  STRATA_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch: ", a_name, " is ", a.str(), " but ", b_name, " is ",
               b.str());
}

void check_same_shape(std::string_view op, std::string_view a_name, const Tensor& a, std::string_view b_name,
                      const Tensor& b) {
  STRATA_CHECK(a.sizes() == b.sizes(), op, ": shape mismatch: ", a_name, " is ", a.str(), " but ", b_name, " is ",
               b.str());
}

void check_device(std::string_view op, std::string_view arg, const Tensor& t, Device d, std::string_view backend) {
  STRATA_CHECK(t.device().type == d.type, op, ": ", arg, " is on ", t.device().str(), " but backend '", backend,
               "' runs on ", d.type == DeviceType::cpu ? "cpu" : "cuda", " (", t.str(), ")");
}

void check_vector(std::string_view op, std::string_view arg, const Tensor& t, int64_t c, const Tensor& like) {
  check_defined(op, arg, t);
  STRATA_CHECK(t.dim() == 1 && t.size(0) == c, op, ": ", arg, " must be [", c, "] to match ", like.str(), ", got ",
               t.str());
  check_same_dtype(op, arg, t, "input", like);
}

}  // namespace strata::ops
