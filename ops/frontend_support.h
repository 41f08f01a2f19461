#pragma once
// Internal to ops/*_ops.cpp: the per-call checks every front-end function makes,
// and the explicit instantiation over the dispatchers of this build.
#include "strata/ops/checks.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"
#include "strata/strata_generated/static_backends.h"

namespace strata::ops::detail {

template <class D>
void check_input(const D& d, OpId op, std::string_view arg, const Tensor& t) {
  check_defined(op_name(op), arg, t);
  check_device(op_name(op), arg, t, d.device(), d.backend_name());
  STRATA_CHECK(d.supports(op, t.dtype()), op_name(op), ": backend '", d.backend_name(), "' does not support ",
               dtype_name(t.dtype()), " (", arg, " ", t.str(), ")");
}


}  // namespace strata::ops::detail

#define STRATA_OPS_STATIC_INSTANTIATE(Impl) STRATA_OPS_INSTANTIATE(::strata::ops::StaticDispatch<Impl>)
#define STRATA_OPS_INSTANTIATE_ALL()                   \
  STRATA_OPS_INSTANTIATE(::strata::ops::VirtualDispatch) \
  STRATA_FOR_EACH_BACKEND(STRATA_OPS_STATIC_INSTANTIATE)
