#include "strata/nn/custom_model.h"

namespace strata::nn {

std::string describe_network(const Module& net) {
  std::string s(net.type_name());
  if (net.children().empty()) return s;
  s += "(";
  for (size_t i = 0; i < net.children().size(); ++i)
    s += (i ? ", " : "") + std::string(net.children()[i].second->type_name());
  return s + ")";
}

namespace {

// The one dtype of the network's parameters (f32 for a network without any).
DType parameter_dtype(const Module& net) {
  const StateDict params = net.named_parameters();
  if (params.empty()) return DType::f32;
  const DType dt = params.front().second.dtype();
  for (const auto& [name, t] : params)
    STRATA_CHECK(t.dtype() == dt, "make_model: parameters of one dtype needed, but ", params.front().first, " is ",
                 dtype_name(dt), " and ", name, " is ", dtype_name(t.dtype()));
  return dt;
}

}  // namespace

std::unique_ptr<Model> detail::make_model(const NetworkBuilders& builders, ops::DispatchMode mode,
                                          std::string_view backend, const ModelOptions& o) {
  return with_policy(mode, backend, [&](const auto& p) -> std::unique_ptr<Model> {
    using P = std::decay_t<decltype(p)>;
    std::unique_ptr<Module> net = std::get<BuildFn<P>>(builders)(p);
    STRATA_CHECK(net != nullptr, "make_model: the network builder returned no module");
    net->set_input_grad(false);
    std::string init;
    if (o.init) {
      initialize(*net, *o.init);
      init = describe(*o.init);
    } else {
      const uint64_t seed = with_generator(nullptr, [](Generator& g) { return g.initial_seed(); });
      init = "pytorch_default at construction (default generator seeded " + std::to_string(seed) + ")";
    }
    const DType dt = parameter_dtype(*net);
    const std::string what = describe_network(*net);
    ModelOptions rest = o;
    rest.init.reset();
    return wrap_module(p, std::move(net), dt, rest, what, init, mode);
  });
}

}  // namespace strata::nn
