// The element-wise formulas of ops/table/pointwise.def: the shared CPU loops, in f32 and f64.
#include "strata/backends/cpu/pointwise.h"
#include "strata/backends/onednn/call_observer.h"
#include "strata/backends/onednn/onednn_backend.h"

namespace strata::backends {

// unary_fwd reports to the call observer (call_observer.h): a GPT's GELU, which codegen/ writes out.
STRATA_CPU_POINTWISE_MEMBERS_OBSERVED(OneDnnBackend, onednn::observe_call)

}  // namespace strata::backends
