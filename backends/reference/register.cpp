#include "strata/backends/reference/reference_backend.h"

namespace strata::backends {

bool ReferenceBackend::supports(OpId op, DType dt) const {
  if (op == OpId::copy) return true;
  return dt == DType::f32 || dt == DType::f64;
}

BackendFactoryResult make_backend_reference() {
  return {std::make_unique<BackendAdapter<ReferenceBackend>>(), {}};
}

}  // namespace strata::backends
