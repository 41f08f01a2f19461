#pragma once
// The dispatch policies of the front end. Both have one member per op of the
// table with the backend's own signature:
//  - VirtualDispatch: registry -> Backend& -> virtual call (through BackendAdapter).
//  - StaticDispatch<Impl>: the backend class is a template parameter; the call is
//    resolved at compile time and can inline.
// Both run the very same backend member functions, and both pay the same trace
// branch, so virtual - static is exactly the cost of the indirect call.
// Direct<Impl> (direct and graph modes) does not use the front end at all: see ops/direct/.
// with_policy turns the mode chosen at run time into one of these types, in this one place,
// and checks each mode's requirements there (graph mode: a backend that captures graphs).
#include <string>
#include <string_view>

#include "strata/backends/api/registry.h"
#include "strata/backends/static_backends.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/trace.h"

namespace strata::ops {

// graph: direct mode's plans, captured into a backend graph and replayed (nn/model.h).
enum class DispatchMode { virtual_call, static_call, direct, graph };
DispatchMode parse_dispatch_mode(const std::string& s);  // "virtual" | "static" | "direct" | "graph"
std::string_view dispatch_mode_name(DispatchMode m);

struct VirtualDispatch {
  backends::Backend* backend = nullptr;

  static constexpr std::string_view kMode = "virtual";
  explicit VirtualDispatch(backends::Backend& b) : backend(&b) {}
  std::string_view backend_name() const { return backend->name(); }
  Device device() const { return {backend->device_type(), 0}; }
  const backends::Capabilities& capabilities() const { return backend->capabilities(); }
  MemoryFormat preferred_memory_format(DType dt) const { return backend->preferred_memory_format(dt); }
  void synchronize() const { backend->synchronize(); }
#define STRATA_OP(op, Args, kind)                                                    \
  void op(const Args& a) const {                                               \
    if (trace_enabled()) [[unlikely]]                                          \
      traced_call(                                                             \
          OpId::op, backend->name(), [&] { backend->op(a); },                 \
          [&] { backend->synchronize(); });                                    \
    else                                                                       \
      backend->op(a);                                                          \
  }
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

template <backends::BackendImpl Impl>
struct StaticDispatch {
  Impl* impl = nullptr;

  static constexpr std::string_view kMode = "static";
  explicit StaticDispatch(Impl& i) : impl(&i) {}
  // The instance the registry holds, so both modes share backend state (caches).
  StaticDispatch() : impl(&backends::registry().impl<Impl>()) {}
  std::string_view backend_name() const { return Impl::kName; }
  Device device() const { return {Impl::kDevice, 0}; }
  const backends::Capabilities& capabilities() const { return impl->capabilities(); }
  MemoryFormat preferred_memory_format(DType dt) const { return backends::preferred_memory_format(*impl, dt); }
  void synchronize() const { impl->synchronize(); }
#define STRATA_OP(op, Args, kind)                                                    \
  void op(const Args& a) const {                                               \
    if (trace_enabled()) [[unlikely]]                                          \
      traced_call(                                                             \
          OpId::op, Impl::kName, [&] { impl->op(a); },                        \
          [&] { impl->synchronize(); });                                       \
    else                                                                       \
      impl->op(a);                                                             \
  }
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

// Direct and graph modes: no front end. A module plans each call once per input (ops/direct/)
// and runs the backend class's kernel directly; graph mode captures those plans (nn/model.h).
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
  MemoryFormat preferred_memory_format(DType dt) const { return backends::preferred_memory_format(*impl, dt); }
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
#define STRATA_OPS_WITH_POLICY_CASE(Impl)                                                   \
  if (backend == Impl::kName) {                                                            \
    auto& impl = backends::registry().impl<Impl>();                                        \
    if (mode == ops::DispatchMode::static_call) return fn(ops::StaticDispatch<Impl>(impl)); \
    if (mode == ops::DispatchMode::graph && !captures_graphs_v<Direct<Impl>>)              \
      STRATA_FAIL("graph mode: backend '", backend, "' does not capture graphs; its direct mode already runs "  \
                  "the planned ops as direct calls (graph mode is for the cuda backend)");  \
    return fn(Direct<Impl>(impl));                                                         \
  }
  STRATA_FOR_EACH_BACKEND(STRATA_OPS_WITH_POLICY_CASE)
#undef STRATA_OPS_WITH_POLICY_CASE
  STRATA_FAIL("dispatch: backend '", backend, "' is registered but has no static class in this build (",
              backends::registry().describe(), ")");
}


}  // namespace strata::ops
