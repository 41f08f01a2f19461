#pragma once
// Internal to ops/*_ops.cpp: what a front-end function runs once (an op's binding, ops/bind/,
// which the direct-mode plans keep), the checks of the front end's own rules (broadcasting,
// dims), and the explicit instantiation over the dispatchers of this build.
#include "strata/ops/checks.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"
#include "strata/ops/validate.h"
#include "strata/backends/static_backends.h"

#define STRATA_OPS_STATIC_INSTANTIATE(Impl) STRATA_OPS_INSTANTIATE(::strata::ops::StaticDispatch<Impl>)
#define STRATA_OPS_INSTANTIATE_ALL()                   \
  STRATA_OPS_INSTANTIATE(::strata::ops::VirtualDispatch) \
  STRATA_FOR_EACH_BACKEND(STRATA_OPS_STATIC_INSTANTIATE)
