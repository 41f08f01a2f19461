#pragma once
// The dispatch policies of the front end. Both have one member per op of the
// table with the backend's own signature:
//  - VirtualDispatch: registry -> Backend& -> virtual call (through BackendAdapter).
//  - StaticDispatch<Impl>: the backend class is a template parameter; the call is
//    resolved at compile time and can inline.
// Both run the very same backend member functions, and both pay the same trace
// branch, so virtual - static is exactly the cost of the indirect call.
// The third mode, direct, does not use the front end at all: see ops/direct/.
#include <string>
#include <string_view>

#include "strata/backends/api/registry.h"
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

}  // namespace strata::ops
