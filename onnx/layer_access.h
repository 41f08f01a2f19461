#pragma once
// Internal to onnx/: a module seen as one of strata's layer templates, whatever dispatch
// policy it was built with. visit_as<nn::Conv2d>(m, fn) calls fn(const nn::Conv2d<P>&)
// for the policy P that m was built with and returns true, or returns false when m is
// no Conv2d. The policies are those of the build (nn/policy.h).
#include <type_traits>

#include "strata/nn/policy.h"

namespace strata::onnx::detail {

template <class Fn>
void for_each_policy(Fn&& fn) {
  fn(std::type_identity<ops::VirtualDispatch>{});
#define STRATA_ONNX_POLICIES(Impl)                         \
  fn(std::type_identity<ops::StaticDispatch<Impl>>{}); \
  fn(std::type_identity<nn::Direct<Impl>>{});
  STRATA_FOR_EACH_BACKEND(STRATA_ONNX_POLICIES)
#undef STRATA_ONNX_POLICIES
}

template <template <class> class Layer, class Fn>
bool visit_as(const nn::Module& m, Fn&& fn) {
  bool found = false;
  for_each_policy([&](auto tag) {
    using P = typename decltype(tag)::type;
    if (found) return;
    if (const auto* layer = dynamic_cast<const Layer<P>*>(&m)) {
      found = true;
      fn(*layer);
    }
  });
  return found;
}

template <template <class> class Layer>
bool is_a(const nn::Module& m) {
  return visit_as<Layer>(m, [](const auto&) {});
}

}  // namespace strata::onnx::detail
