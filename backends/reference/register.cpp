#include "strata/backends/reference/reference_backend.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

// f32 and f64 for every op (the oracle's loops accumulate in double); copy converts any dtype,
// index_select moves any, comparisons read every numeric dtype.
const Capabilities& ReferenceBackend::capabilities() const {
  static constexpr Capabilities kTable = [] {
    Capabilities c;
    c.all(kFloat).op({OpId::copy, OpId::index_select}, kAnyDType).op({OpId::compare}, kNumeric);
    return c;
  }();
  return kTable;
}

BackendFactoryResult make_backend_reference() {
  return {std::make_unique<BackendAdapter<ReferenceBackend>>(), {}};
}

}  // namespace strata::backends
