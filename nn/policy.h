#pragma once
// The policies an nn module is written against. One module source serves all three
// dispatch modes:
//  - ops::VirtualDispatch and ops::StaticDispatch<Impl> ("tape" policies): forward
//    goes through autograd::* (front-end checks, allocation, tape); backward is
//    autograd::backward(loss).
//  - nn::Direct<Impl>: forward plans each call once per input (ops/direct/plans.h)
//    and then calls the backend class directly; backward is explicit, module by
//    module in reverse order, and writes each parameter's gradient to its .grad().
// Every module and model template is explicitly instantiated for VirtualDispatch and
// for StaticDispatch<Impl> and Direct<Impl> of each backend this build compiled in
// (STRATA_NN_INSTANTIATE_ALL, used only in nn/*.cpp).
#include <string_view>
#include <type_traits>
#include <utility>

#include "strata/backends/api/registry.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/dispatch.h"
#include "strata/backends/static_backends.h"

namespace strata::nn {

template <backends::BackendImpl Impl>
struct Direct {
  using Backend = Impl;
  Impl* impl = nullptr;

  static constexpr std::string_view kMode = "direct";
  explicit Direct(Impl& i) : impl(&i) {}
  // The instance the registry holds, so every mode shares backend state (caches).
  Direct() : impl(&backends::registry().impl<Impl>()) {}
  std::string_view backend_name() const { return Impl::kName; }
  Device device() const { return {Impl::kDevice, 0}; }
  const backends::Capabilities& capabilities() const { return impl->capabilities(); }
  void synchronize() const { impl->synchronize(); }
};

template <class P>
inline constexpr bool is_direct_v = false;
template <class Impl>
inline constexpr bool is_direct_v<Direct<Impl>> = true;

// Whether policy P can run graph mode: direct plans on a backend that captures graphs.
template <class P>
inline constexpr bool captures_graphs_v = false;
template <class Impl>
inline constexpr bool captures_graphs_v<Direct<Impl>> = ops::direct::CapturesGraphs<Impl>;

// The policy value for `mode` on the backend named `backend` (empty: the best
// available, backends::Registry::best), passed to fn (a generic lambda, instantiated
// once per policy of the build). An unknown backend name or one that is compiled in
// but cannot run here is a strata::Error listing the built ones. Graph mode is direct
// mode's policy (the model captures its plans) on a backend that captures graphs; on
// the others it is an error: their direct plans already run as a list of direct calls,
// with no launch cost for a graph to remove.
template <class Fn>
decltype(auto) with_policy(ops::DispatchMode mode, std::string_view backend, Fn&& fn) {
  if (backend.empty()) backend = backends::registry().best();
  if (mode == ops::DispatchMode::virtual_call) return fn(ops::VirtualDispatch(backends::registry().get(backend)));
  backends::registry().get(backend);  // throws the registry's error for unknown/unavailable names
#define STRATA_NN_WITH_POLICY_CASE(Impl)                                                   \
  if (backend == Impl::kName) {                                                            \
    auto& impl = backends::registry().impl<Impl>();                                        \
    if (mode == ops::DispatchMode::static_call) return fn(ops::StaticDispatch<Impl>(impl)); \
    if (mode == ops::DispatchMode::graph && !captures_graphs_v<Direct<Impl>>)              \
      STRATA_FAIL("graph mode: backend '", backend, "' does not capture graphs; its direct mode already runs "  \
                  "the planned ops as direct calls (graph mode is for the cuda backend)");  \
    return fn(Direct<Impl>(impl));                                                         \
  }
  STRATA_FOR_EACH_BACKEND(STRATA_NN_WITH_POLICY_CASE)
#undef STRATA_NN_WITH_POLICY_CASE
  STRATA_FAIL("nn: backend '", backend, "' is registered but has no static class in this build (",
              backends::registry().describe(), ")");
}

}  // namespace strata::nn

// STRATA_NN_INSTANTIATE(P) must be defined by the including .cpp.
#define STRATA_NN_STATIC_INSTANTIATE(Impl)                  \
  STRATA_NN_INSTANTIATE(::strata::ops::StaticDispatch<Impl>) \
  STRATA_NN_INSTANTIATE(::strata::nn::Direct<Impl>)
#define STRATA_NN_INSTANTIATE_ALL()                    \
  STRATA_NN_INSTANTIATE(::strata::ops::VirtualDispatch) \
  STRATA_FOR_EACH_BACKEND(STRATA_NN_STATIC_INSTANTIATE)
