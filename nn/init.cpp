#include "strata/nn/init.h"

#include <cmath>
#include <vector>

#include "strata/nn/layers/blocks.h"
#include "strata/nn/layers/layer_util.h"

namespace strata::nn {

InitPolicy parse_init_policy(std::string_view s) {
  if (s == "pytorch_default") return InitPolicy::pytorch_default;
  if (s == "kaiming_normal_fan_out") return InitPolicy::kaiming_normal_fan_out;
  if (s == "xavier_uniform") return InitPolicy::xavier_uniform;
  if (s == "fixup") return InitPolicy::fixup;
  STRATA_FAIL("init: unknown policy '", s, "' (known: pytorch_default, kaiming_normal_fan_out, xavier_uniform, fixup)");
}

std::string_view init_policy_name(InitPolicy p) {
  switch (p) {
    case InitPolicy::pytorch_default: return "pytorch_default";
    case InitPolicy::kaiming_normal_fan_out: return "kaiming_normal_fan_out";
    case InitPolicy::xavier_uniform: return "xavier_uniform";
    case InitPolicy::fixup: return "fixup";
  }
  return "?";
}

std::string describe(const InitConfig& c) {
  std::string s = std::string(init_policy_name(c.policy)) + " (seed " + std::to_string(c.seed);
  if (c.zero_last_bn_gamma) s += ", zero_last_bn_gamma";
  return s + ")";
}

namespace init {

int64_t fan_in(const Tensor& w) {
  STRATA_CHECK(w.dim() >= 2, "init: fan_in needs a weight of rank >= 2, got ", w.str());
  int64_t receptive = 1;
  for (int i = 2; i < w.dim(); ++i) receptive *= w.size(i);
  return w.size(1) * receptive;
}

int64_t fan_out(const Tensor& w) {
  STRATA_CHECK(w.dim() >= 2, "init: fan_out needs a weight of rank >= 2, got ", w.str());
  int64_t receptive = 1;
  for (int i = 2; i < w.dim(); ++i) receptive *= w.size(i);
  return w.size(0) * receptive;
}

}  // namespace init

namespace {

void fill_uniform(Generator& rng, const Tensor& t, double bound) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (double& x : v) x = rng.uniform(-bound, bound);
  detail::assign_host(t, v);
}

void fill_normal(Generator& rng, const Tensor& t, double std) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (double& x : v) x = std * rng.normal();
  detail::assign_host(t, v);
}

void fill_const(const Tensor& t, double value) {
  detail::assign_host(t, std::vector<double>(static_cast<size_t>(t.numel()), value));
}

const Tensor* own(const Module& m, std::string_view name) {
  for (const auto& [n, t] : m.own_parameters())
    if (n == name) return &t;
  return nullptr;
}

// nn.Conv2d / nn.Linear reset_parameters.
void pytorch_default_weight_bias(Generator& rng, const Module& m) {
  const Tensor& w = *own(m, "weight");
  const double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in(w)));
  // kaiming_uniform_(a=sqrt(5)): gain = sqrt(2 / (1 + 5)), bound = gain * sqrt(3 / fan_in).
  const double wbound = std::sqrt(2.0 / 6.0) * std::sqrt(3.0 / static_cast<double>(init::fan_in(w)));
  fill_uniform(rng, w, wbound);
  if (const Tensor* b = own(m, "bias")) fill_uniform(rng, *b, bound);
}

}  // namespace

void init::reset_parameters(const Module& layer, Generator* gen) {
  with_generator(gen, [&](Generator& g) { pytorch_default_weight_bias(g, layer); });
}

namespace {

void init_bn(const Module& m, double gamma) {
  fill_const(m.param("weight"), gamma);
  fill_const(m.param("bias"), 0.0);
  fill_const(m.buffer("running_mean"), 0.0);
  fill_const(m.buffer("running_var"), 1.0);
  fill_const(m.buffer("num_batches_tracked"), 0.0);
}

double he_fan_out_std(const Tensor& w) { return std::sqrt(2.0 / static_cast<double>(init::fan_out(w))); }

}  // namespace

void initialize(Module& root, const InitConfig& c) {
  Generator rng(c.seed);
  auto modules = root.named_modules();

  // Fixup's per-block scaling: which convs belong to which block, and L.
  std::vector<std::pair<const Module*, double>> fixup_std;  // conv -> std (0 = zero)
  int64_t blocks = 0;
  for (auto& [name, m] : modules)
    if (dynamic_cast<ResidualBlockBase*>(m)) ++blocks;
  if (c.policy == InitPolicy::fixup) {
    STRATA_CHECK(blocks > 0, "init: fixup needs a network with residual blocks; ", root.type_name(), " has none");
    for (auto& [name, m] : modules) {
      auto* blk = dynamic_cast<ResidualBlockBase*>(m);
      if (!blk) continue;
      const auto convs = blk->branch_convs();
      const double depth = static_cast<double>(convs.size());
      const double scale = std::pow(static_cast<double>(blocks), -1.0 / (2.0 * depth - 2.0));
      for (size_t i = 0; i < convs.size(); ++i)
        fixup_std.emplace_back(convs[i], i + 1 == convs.size() ? 0.0 : he_fan_out_std(convs[i]->param("weight")) * scale);
      if (Module* ds = blk->downsample_conv()) fixup_std.emplace_back(ds, he_fan_out_std(ds->param("weight")));
    }
  }
  auto fixup_lookup = [&](const Module* m) -> const double* {
    for (const auto& [mm, s] : fixup_std)
      if (mm == m) return &s;
    return nullptr;
  };

  for (auto& [name, m] : modules) {
    const std::string_view type = m->type_name();
    if (type == "Conv2d") {
      const Tensor& w = m->param("weight");
      const Tensor* b = own(*m, "bias");
      switch (c.policy) {
        case InitPolicy::pytorch_default: pytorch_default_weight_bias(rng, *m); break;
        case InitPolicy::kaiming_normal_fan_out:
          fill_normal(rng, w, he_fan_out_std(w));
          if (b) fill_const(*b, 0.0);
          break;
        case InitPolicy::xavier_uniform:
          fill_uniform(rng, w, std::sqrt(6.0 / static_cast<double>(init::fan_in(w) + init::fan_out(w))));
          if (b) fill_const(*b, 0.0);
          break;
        case InitPolicy::fixup:
          if (const double* s = fixup_lookup(m)) {
            if (*s == 0.0)
              fill_const(w, 0.0);
            else
              fill_normal(rng, w, *s);
            if (b) fill_const(*b, 0.0);
          } else {
            pytorch_default_weight_bias(rng, *m);  // the stem
          }
          break;
      }
    } else if (type == "Linear") {
      const Tensor& w = m->param("weight");
      const Tensor* b = own(*m, "bias");
      switch (c.policy) {
        case InitPolicy::pytorch_default:
        case InitPolicy::kaiming_normal_fan_out: pytorch_default_weight_bias(rng, *m); break;
        case InitPolicy::xavier_uniform:
          fill_uniform(rng, w, std::sqrt(6.0 / static_cast<double>(init::fan_in(w) + init::fan_out(w))));
          if (b) fill_const(*b, 0.0);
          break;
        case InitPolicy::fixup:
          fill_const(w, 0.0);
          if (b) fill_const(*b, 0.0);
          break;
      }
    } else if (type == "BatchNorm2d") {
      init_bn(*m, 1.0);
    }
  }

  if (c.zero_last_bn_gamma)
    for (auto& [name, m] : modules)
      if (auto* blk = dynamic_cast<ResidualBlockBase*>(m)) fill_const(blk->last_bn()->param("weight"), 0.0);
}

}  // namespace strata::nn
