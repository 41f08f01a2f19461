#include <cblas.h>

#include <cstdio>

#include "strata/backends/cpu/capabilities.h"
#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

OpenBlasBackend::OpenBlasBackend() = default;

// f32 and f64 for every op (sgemm/dgemm and the shared loops); fill and copy move any dtype.
const Capabilities& OpenBlasBackend::capabilities() const { return cpu::kEveryOpInF32AndF64; }

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
