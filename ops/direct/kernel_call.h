#pragma once
// One backend kernel call of direct mode, traced like the front end's calls
// (ops/dispatch.h): with the trace on (STRATA_TRACE=1) every mode shows its ops; off,
// each mode pays the same one predictable branch, so the differences between the modes
// stay what DESIGN.md says they are. In a memory plan's recording pass the call is
// noted with the buffers its arguments name and not run (step_memory.h); in graph
// mode's capture the backend is asked after each call whether it broke the capture
// (graph_capture.h).
//   ops::direct::run_kernel<OpId::conv2d_fwd>(*impl_, fwd_);
#include "strata/backends/api/backend.h"
#include "strata/ops/bind/bound.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/table/arg_views.h"
#include "strata/ops/trace.h"

namespace strata::ops::direct {

template <OpId op, backends::BackendImpl Impl>
inline void run_kernel(Impl& impl, const typename OpCall<op>::Args& a) {
  if (trace_enabled() || recording() || capturing()) [[unlikely]] {
    if (recording()) {
      for_each_view(a, [](const TensorView& v) { detail::note_use(v.data); });
      detail::next_position();
      return;
    }
    if (capturing()) {  // untraced: a traced call waits for the device, which a capture cannot
      detail::captured_call(op, Impl::kName, [&] { OpCall<op>::call(impl, a); });
      return;
    }
    traced_call(op, Impl::kName, [&] { OpCall<op>::call(impl, a); }, [&] { impl.synchronize(); });
  } else {
    OpCall<op>::call(impl, a);
  }
}

}  // namespace strata::ops::direct
