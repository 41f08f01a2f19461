#include <cblas.h>

#include <cstdio>

#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

OpenBlasBackend::OpenBlasBackend() = default;

bool OpenBlasBackend::supports(OpId op, DType dt) const {
  if (op == OpId::copy || op == OpId::fill) return true;  // any dtype
  return dt == DType::f32 || dt == DType::f64;
}

std::string OpenBlasBackend::describe() {
  const char* config = openblas_get_config();
  const char* core = openblas_get_corename();
  return std::string(config ? config : "OpenBLAS") + "; core=" + (core ? core : "?") +
         " threads=" + std::to_string(openblas_get_num_threads());
}

BackendFactoryResult make_backend_openblas() {
  return {std::make_unique<BackendAdapter<OpenBlasBackend>>(), {}};
}

}  // namespace strata::backends
