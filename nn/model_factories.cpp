// The built-in networks as Models (nn/model.h), and the precision names the programs take.
#include "strata/nn/model.h"

#include "strata/nn/lenet.h"
#include "strata/nn/layers/transformer.h"
#include "strata/nn/policy.h"
#include "strata/nn/resnet.h"

namespace strata::nn {

std::optional<DType> parse_precision(std::string_view name) {
  if (name == "fp32") return std::nullopt;
  if (name == "bf16") return DType::bf16;
  if (name == "fp16") return DType::f16;
  STRATA_FAIL("unknown precision '", name, "' (known: fp32, bf16, fp16)");
}

std::unique_ptr<Model> make_resnet(const ResNetConfig& c, ops::DispatchMode mode, std::string_view backend,
                                   const ModelOptions& o) {
  STRATA_CHECK(!o.init, "make_resnet: the init policy comes from ResNetConfig::init, not ModelOptions::init");
  return with_policy(mode, backend, [&](const auto& p) -> std::unique_ptr<Model> {
    return detail::wrap_module(p, make_resnet_module(p, c), c.dtype, o, describe(c), describe(c.init), mode);
  });
}

std::unique_ptr<Model> make_lenet(const LeNetConfig& c, ops::DispatchMode mode, std::string_view backend,
                                  const ModelOptions& o) {
  STRATA_CHECK(!o.init, "make_lenet: the init policy comes from LeNetConfig::init, not ModelOptions::init");
  return with_policy(mode, backend, [&](const auto& p) -> std::unique_ptr<Model> {
    using P = std::decay_t<decltype(p)>;
    return detail::wrap_module(p, std::make_unique<LeNet<P>>(p, c), c.dtype, o, describe(c), describe(c.init),
                               mode);
  });
}

std::unique_ptr<Model> make_gpt(const GptConfig& c, ops::DispatchMode mode, std::string_view backend,
                                const ModelOptions& o) {
  STRATA_CHECK(!o.init, "make_gpt: GPT-2's initialisation is the model's own (nn/layers/transformer.h), not "
                        "ModelOptions::init");
  // The network casts (GptConfig::compute_dtype) and the Model converts its output back: one dtype for both.
  STRATA_CHECK(!o.compute_dtype || !c.compute_dtype || *o.compute_dtype == *c.compute_dtype,
               "make_gpt: ModelOptions::compute_dtype ", o.compute_dtype ? dtype_name(*o.compute_dtype) : "",
               " and GptConfig::compute_dtype ", c.compute_dtype ? dtype_name(*c.compute_dtype) : "", " disagree");
  GptConfig cc = c;
  if (o.compute_dtype) cc.compute_dtype = o.compute_dtype;
  ModelOptions oo = o;
  oo.compute_dtype = cc.compute_dtype;
  return with_policy(mode, backend, [&](const auto& p) -> std::unique_ptr<Model> {
    using P = std::decay_t<decltype(p)>;
    const std::string what = "GPT (" + std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) +
                             " heads, " + std::to_string(c.n_embd) + " wide, vocabulary " +
                             std::to_string(c.vocab_size) + ", context " + std::to_string(c.block_size) + ")";
    return detail::wrap_module(p, std::make_unique<Gpt<P>>(p, cc), c.dtype, oo, what,
                               "GPT-2's: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer))", mode);
  });
}

}  // namespace strata::nn
