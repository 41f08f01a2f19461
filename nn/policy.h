#pragma once
// The policies an nn module is written against (ops/dispatch.h says what each is). One module
// source serves every dispatch mode:
//  - ops::VirtualDispatch and ops::StaticDispatch<Impl> ("tape" policies): forward
//    goes through autograd::* (front-end checks, allocation, tape); backward is
//    autograd::backward(loss).
//  - ops::Direct<Impl> (direct and graph modes): forward plans each call once per input
//    (ops/direct/) and then calls the backend class directly; backward is explicit, module
//    by module in reverse order, and writes each parameter's gradient to its .grad().
// Every module and model template is explicitly instantiated for VirtualDispatch and
// for StaticDispatch<Impl> and Direct<Impl> of each backend this build compiled in
// (STRATA_NN_INSTANTIATE_ALL, used only in nn/*.cpp).
#include "strata/backends/static_backends.h"
#include "strata/ops/dispatch.h"

namespace strata::nn {

// The policies live in ops/dispatch.h with the other dispatch modes; nn's modules name them here.
using ops::captures_graphs_v;
using ops::Direct;
using ops::is_direct_v;
using ops::with_policy;

}  // namespace strata::nn

// STRATA_NN_INSTANTIATE(P) must be defined by the including .cpp.
#define STRATA_NN_STATIC_INSTANTIATE(Impl)                  \
  STRATA_NN_INSTANTIATE(::strata::ops::StaticDispatch<Impl>) \
  STRATA_NN_INSTANTIATE(::strata::nn::Direct<Impl>)
#define STRATA_NN_INSTANTIATE_ALL()                    \
  STRATA_NN_INSTANTIATE(::strata::ops::VirtualDispatch) \
  STRATA_FOR_EACH_BACKEND(STRATA_NN_STATIC_INSTANTIATE)
