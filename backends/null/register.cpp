#include "strata/backends/null/null_backend.h"

namespace strata::backends {
BackendFactoryResult make_backend_null() { return {std::make_unique<BackendAdapter<NullBackend>>(), {}}; }
}  // namespace strata::backends
