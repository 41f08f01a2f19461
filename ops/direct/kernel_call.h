#pragma once
// One backend kernel call of direct mode, traced like the front end's calls
// (ops/dispatch.h): with the trace on (STRATA_TRACE=1) every mode shows its ops; off,
// each mode pays the same one predictable branch, so the differences between the modes
// stay what DESIGN.md says they are.
//   ops::direct::run_kernel(*impl_, OpId::conv2d_fwd, [&] { impl_->conv2d_fwd(fwd_); });
#include "strata/backends/api/backend.h"
#include "strata/ops/trace.h"

namespace strata::ops::direct {

template <backends::BackendImpl Impl, class Call>
inline void run_kernel(Impl& impl, OpId op, Call&& call) {
  if (trace_enabled()) [[unlikely]]
    traced_call(op, Impl::kName, call, [&] { impl.synchronize(); });
  else
    call();
}

}  // namespace strata::ops::direct
