#pragma once
// The type-erased Model (nn/model.h) over a network the user writes: a Sequential, or
// the user's own Module. train_step, predict, describe, optimizers, checkpoints and
// the three dispatch modes work as they do for make_resnet.
//
//   auto model = nn::make_model([](const auto& p) {
//     return nn::sequential(nn::linear(p, 16, 32), nn::relu(p), nn::linear(p, 32, 4));
//   });                                   // virtual dispatch on the best backend
//   auto opt = model->make_optimizer({.lr = 0.1});
//   auto r = model->train_step(x, labels, *opt);
//
// The builder is called once, with the policy value of the chosen dispatch mode and
// backend (nn/policy.h), and returns a std::unique_ptr to a Module whose layers are
// built for that policy (nn/layers/factories.h). It is compiled for every policy of
// the build, as the layers are: a generic lambda, or a class template used as
//
//   template <class P> struct Net : nn::Module { explicit Net(const P& p); ... };
//   auto model = nn::make_model<Net>(ops::DispatchMode::direct);
//
// The library, not the caller's code, picks the policy: the caller's program never
// calls into a backend class itself. Direct mode drives the network's backward():
// Sequential has one; a user's Module needs its own (its children's backward in
// reverse order) to run in direct mode, and is told with set_input_grad(false) that
// the network input needs no gradient. The parameters' dtype (one for all) is the
// model's; layers are on the policy's device.
#include <functional>
#include <memory>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "strata/nn/model.h"
#include "strata/nn/policy.h"

namespace strata::nn {

namespace detail {
template <class P>
using BuildFn = std::function<std::unique_ptr<Module>(const P&)>;
// One builder per policy of the build, filled where the network's templates are
// instantiated and called by the library with the policy it picked.
#define STRATA_NN_BUILD_FN(Impl) , BuildFn<ops::StaticDispatch<Impl>>, BuildFn<Direct<Impl>>
using NetworkBuilders = std::tuple<BuildFn<ops::VirtualDispatch> STRATA_FOR_EACH_BACKEND(STRATA_NN_BUILD_FN)>;
#undef STRATA_NN_BUILD_FN

std::unique_ptr<Model> make_model(const NetworkBuilders& builders, ops::DispatchMode mode, std::string_view backend,
                                  const ModelOptions& o);
}  // namespace detail

// `backend` empty: the best available (backends::Registry::best).
template <class Build>
  requires std::is_invocable_v<Build&, const ops::VirtualDispatch&>
std::unique_ptr<Model> make_model(Build&& build, ops::DispatchMode mode = ops::DispatchMode::virtual_call,
                                  std::string_view backend = {}, const ModelOptions& o = {}) {
  detail::NetworkBuilders builders;
  std::apply(
      [&](auto&... fn) { ((fn = [&build](const auto& p) -> std::unique_ptr<Module> { return build(p); }), ...); },
      builders);
  return detail::make_model(builders, mode, backend, o);
}

template <template <class> class Net>
std::unique_ptr<Model> make_model(ops::DispatchMode mode = ops::DispatchMode::virtual_call,
                                  std::string_view backend = {}, const ModelOptions& o = {}) {
  return make_model([](const auto& p) { return std::make_unique<Net<std::decay_t<decltype(p)>>>(p); }, mode,
                    backend, o);
}

// "Sequential(Linear, ReLU, Linear)": the network's type and its children's types.
std::string describe_network(const Module& net);

}  // namespace strata::nn
