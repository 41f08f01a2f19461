// GPT-2's layers (nn/layers/transformer.h) in the tape modes: Hugging Face's and nanoGPT's
// parameter names and shapes, the gradients of every parameter against central differences in
// f64, causality (a token never changes the logits before it), the virtual and static modes
// bitwise alike, a loss that falls on a learnable sequence, the growing and static key/value
// caches against the whole sequence, and clear errors for what cannot run (direct mode:
// gpt_direct_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>

#include "gpt_test_util.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/gradcheck.h"
#include "strata/autograd/nn_functional.h"
#include "strata/core/factories.h"
#include "strata/nn/generate.h"
#include "strata/nn/gpt_io.h"
#include "strata/nn/layers/transformer.h"
#include "strata/nn/policy.h"
#include "support/expect_error.h"
#include "support/random.h"

namespace strata::testing {
namespace {

using ops::StaticDispatch;
using ops::VirtualDispatch;
using Ref = backends::ReferenceBackend;

nn::GptConfig tiny(DType dt = DType::f64) {
  nn::GptConfig c = tiny_gpt(dt);
  c.vocab_size = 7;
  c.block_size = 6;
  return c;
}
VirtualDispatch reference() { return VirtualDispatch(backends::registry().get("reference")); }
Tensor ids(std::vector<int64_t> v, int64_t b, int64_t t) { return Tensor::from_vector(v, Shape{b, t}); }

TEST(NnGpt, ParametersAreNamedAndShapedAsGpt2s) {
  manual_seed(1);
  nn::Gpt<VirtualDispatch> m(reference(), tiny());
  const nn::StateDict params = m.named_parameters();
  const std::map<std::string, Tensor> p(params.begin(), params.end());
  const std::vector<std::pair<std::string, Shape>> want = {
      {"wte.weight", {7, 8}},          {"wpe.weight", {6, 8}},           {"h.0.ln_1.weight", {8}},
      {"h.0.attn.c_attn.weight", {24, 8}}, {"h.0.attn.c_attn.bias", {24}}, {"h.0.attn.c_proj.weight", {8, 8}},
      {"h.0.mlp.c_fc.weight", {32, 8}}, {"h.0.mlp.c_proj.weight", {8, 32}}, {"h.1.ln_2.bias", {8}},
      {"ln_f.weight", {8}}};
  for (const auto& [name, sizes] : want) {
    const auto it = p.find(name);
    ASSERT_NE(it, p.end()) << name;
    EXPECT_EQ(it->second.sizes(), sizes) << name;
  }
  // 2 layers of 4 linear (weight, bias) and 2 layer norms (weight, bias), 2 embeddings, ln_f.
  EXPECT_EQ(params.size(), 2u * (4 * 2 + 2 * 2) + 2 + 2);
  const std::vector<double> b = p.at("h.0.attn.c_attn.bias").to_vector<double>();
  for (double v : b) EXPECT_EQ(v, 0.0);
}

TEST(NnGpt, EveryParametersGradientMatchesCentralDifferences) {
  manual_seed(2);
  nn::Gpt<VirtualDispatch> m(reference(), tiny());
  const Tensor tokens = ids({1, 4, 2, 6, 0, 3, 3, 5}, 2, 4);
  const Tensor cot = random_tensor({2, 4, 7}, DType::f64, 3);
  std::vector<Tensor> params;
  for (auto& [name, t] : m.named_parameters()) params.push_back(t);
  const auto r = autograd::gradcheck([&](const std::vector<Tensor>&) { return (m.forward(tokens) * cot).sum(); },
                                     params, {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
  EXPECT_TRUE(r.ok) << r.report;
}

TEST(NnGpt, ATokenNeverChangesTheLogitsBeforeIt) {
  manual_seed(3);
  nn::Gpt<VirtualDispatch> m(reference(), tiny());
  const Tensor a = m.forward(ids({1, 2, 3, 4, 5}, 1, 5)), b = m.forward(ids({1, 2, 3, 6, 0}, 1, 5));
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  for (size_t i = 0; i < 3 * 7; ++i) EXPECT_EQ(av[i], bv[i]) << "logit " << i << " of a position before the change";
  EXPECT_NE(av[3 * 7], bv[3 * 7]);  // and the changed position's own logits do change
}

TEST(NnGpt, VirtualAndStaticModesAreBitwiseAlike) {
  manual_seed(4);
  nn::Gpt<VirtualDispatch> v(reference(), tiny(DType::f32));
  manual_seed(4);
  nn::Gpt<StaticDispatch<Ref>> s(StaticDispatch<Ref>(), tiny(DType::f32));
  const Tensor tokens = ids({1, 4, 2, 6, 0, 3}, 1, 6);
  EXPECT_EQ(v.forward(tokens).to_vector<float>(), s.forward(tokens).to_vector<float>());
}

// Next-token prediction on a repeating sequence with Adam (strata::functional's step): the
// loss falls well below log(vocab).
TEST(NnGpt, LossFallsOnALearnableSequence) {
  manual_seed(5);
  nn::GptConfig c = tiny(DType::f32);
  nn::Gpt<VirtualDispatch> m(VirtualDispatch(backends::registry().get(backends::registry().best(DeviceType::cpu))), c);
  const std::vector<int64_t> seq = {0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6};
  const Tensor x = ids({seq.begin(), seq.begin() + 6}, 1, 6), y = Tensor::from_vector(std::vector<int64_t>(seq.begin() + 1, seq.begin() + 7), Shape{6});
  std::vector<Tensor> params, m1, m2;
  for (auto& [name, t] : m.named_parameters()) params.push_back(t), m1.push_back(zeros_like(t)), m2.push_back(zeros_like(t));
  double first = 0, last = 0;
  for (int step = 1; step <= 60; ++step) {
    for (Tensor& p : params) p.set_grad(Tensor());
    const Tensor loss = functional::cross_entropy(m.forward(x).reshape({6, 7}), y);
    loss.backward();
    for (size_t i = 0; i < params.size(); ++i)
      functional::adam_step_(params[i], params[i].grad(), m1[i], m2[i], {.lr = 1e-2}, step);
    last = loss.item();
    if (step == 1) first = last;
  }
  EXPECT_NEAR(first, std::log(7.0), 0.3);
  EXPECT_LT(last, 0.2 * first) << first << " -> " << last;
}

// A GPT-2 state dict in Hugging Face's layout (names under "transformer.", Conv1D weights
// [in, out], lm_head stored again, the attention's mask buffers) loads strictly.
TEST(NnGpt, LoadsHuggingFacesLayoutStrictly) {
  manual_seed(6);
  nn::Gpt<VirtualDispatch> a(reference(), tiny());
  manual_seed(7);
  nn::Gpt<VirtualDispatch> b(reference(), tiny());
  nn::safetensors::Contents hf;
  for (const auto& [name, t] : a.named_parameters()) {
    const bool conv1d = name.ends_with("c_attn.weight") || name.ends_with("c_proj.weight") ||
                        name.ends_with("c_fc.weight");
    hf.tensors.emplace_back("transformer." + name, conv1d ? t.permute({1, 0}).contiguous() : t.clone());
  }
  hf.tensors.emplace_back("lm_head.weight", a.named_parameters().front().second.clone());
  hf.tensors.emplace_back("transformer.h.0.attn.bias", ones({1, 1, 6, 6}, DType::f64));
  nn::load_hf_gpt2(b, hf, "gpt2.safetensors");
  const Tensor tokens = ids({1, 4, 2, 6}, 1, 4);
  EXPECT_EQ(a.forward(tokens).to_vector<double>(), b.forward(tokens).to_vector<double>());

  nn::safetensors::Contents extra = hf;
  extra.tensors.emplace_back("transformer.h.9.mlp.c_fc.weight", zeros({8, 32}, DType::f64));
  EXPECT_STRATA_ERROR(nn::load_hf_gpt2(b, extra, "gpt2.safetensors"), "gpt2.safetensors", "h.9.mlp.c_fc.weight");
  nn::safetensors::Contents short_of = hf;
  short_of.tensors.erase(short_of.tensors.begin() + 1);
  EXPECT_STRATA_ERROR(nn::load_hf_gpt2(b, short_of, "gpt2.safetensors"), "lacks", "transformer.wpe.weight");
  nn::safetensors::Contents untransposed = hf;
  for (auto& [name, t] : untransposed.tensors)
    if (name == "transformer.h.0.mlp.c_fc.weight") t = t.permute({1, 0}).contiguous();
  EXPECT_STRATA_ERROR(nn::load_hf_gpt2(b, untransposed, "gpt2.safetensors"), "h.0.mlp.c_fc.weight", "Conv1D",
                      "[32,8]");
}

// Greedy generation follows the largest logit; top_k = 1 is greedy; a seed repeats its draws;
// top-k draws only among the k largest logits of their position.
TEST(NnGpt, GeneratesGreedilyAndBySeededSampling) {
  manual_seed(8);
  nn::Gpt<VirtualDispatch> m(reference(), tiny());
  const Tensor prompt = ids({3, 1, 4, 1}, 2, 2);
  const Tensor greedy = nn::generate(m, prompt, {.new_tokens = 9, .temperature = 0.0});
  ASSERT_EQ(greedy.sizes(), Shape({2, 11}));  // the window slides past block_size 6
  // The same by hand: argmax of the last position's logits over the latest 6 tokens.
  std::vector<int64_t> row = {3, 1};
  for (int s = 0; s < 9; ++s) {
    const int64_t w = std::min<int64_t>(static_cast<int64_t>(row.size()), 6);
    const Tensor l = m.forward(Tensor::from_vector(std::vector<int64_t>(row.end() - w, row.end()), Shape{1, w}));
    row.push_back(l.select(1, w - 1).argmax(1).to_vector<int64_t>()[0]);
  }
  const std::vector<int64_t> g = greedy.to_vector<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(g.begin(), g.begin() + 11), row);
  EXPECT_EQ(nn::generate(m, prompt, {.new_tokens = 9, .temperature = 0.7, .top_k = 1, .seed = 3}).to_vector<int64_t>(),
            g);
  const nn::GenerateOptions sample{.new_tokens = 4, .temperature = 1.5, .top_k = 2, .seed = 11};
  const Tensor s1 = nn::generate(m, prompt, sample), s2 = nn::generate(m, prompt, sample);
  EXPECT_EQ(s1.to_vector<int64_t>(), s2.to_vector<int64_t>());
  // Each drawn token is among the 2 largest logits at the position before it (causality lets one
  // forward over the whole sequence give every step's logits).
  const Tensor all = m.forward(s1);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 2; t < 6; ++t) {
      const std::vector<double> l = all.select(0, b).select(0, t - 1).to_vector<double>();
      const int64_t tok = s1.to_vector<int64_t>()[static_cast<size_t>(b * 6 + t)];
      int larger = 0;
      for (double v : l) larger += v > l[static_cast<size_t>(tok)];
      EXPECT_LT(larger, 2) << "row " << b << " position " << t;
    }
  EXPECT_STRATA_ERROR(nn::generate(m, prompt, {.temperature = -1.0}), "generate", "temperature -1");
  EXPECT_STRATA_ERROR(nn::generate(m, Tensor::from_vector<float>({1, 2}, {1, 2})), "generate", "token ids");
}

// A key/value cache: the sequence run in pieces gives the logits it gives whole, and cached
// greedy generation picks the tokens the uncached loop picks.
TEST(NnGpt, AKeyValueCacheGivesTheSameLogitsAndTokens) {
  manual_seed(9);
  nn::Gpt<VirtualDispatch> m(reference(), tiny());
  const Tensor all = m.forward(ids({2, 5, 1, 6, 3, 0, 4, 4, 1, 2}, 2, 5));
  nn::KvCache cache;
  const Tensor first = m.forward(ids({2, 5, 1, 0, 4, 4}, 2, 3), &cache);
  EXPECT_EQ(cache.length(), 3);
  const Tensor rest = m.forward(ids({6, 3, 1, 2}, 2, 2), &cache);
  EXPECT_EQ(cache.length(), 5);
  const std::vector<double> whole = all.to_vector<double>(), a = first.to_vector<double>(), b = rest.to_vector<double>();
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t v = 0; v < 7; ++v) {
        const double got = t < 3 ? a[static_cast<size_t>((r * 3 + t) * 7 + v)]
                                 : b[static_cast<size_t>((r * 2 + t - 3) * 7 + v)];
        EXPECT_NEAR(got, whole[static_cast<size_t>((r * 5 + t) * 7 + v)], 1e-12) << r << " " << t << " " << v;
      }
  EXPECT_STRATA_ERROR(m.forward(ids({1, 2}, 1, 2), &cache), "GPT", "7 tokens", "with the cache's", "block_size 6");
  // 2 + 4 tokens fit block_size 6: generated with the cache, against the whole-sequence loop.
  const Tensor prompt = ids({3, 1}, 1, 2);
  std::vector<int64_t> row = {3, 1};
  for (int s = 0; s < 4; ++s) {
    const Tensor l = m.forward(Tensor::from_vector(row, Shape{1, static_cast<int64_t>(row.size())}));
    row.push_back(l.select(1, l.size(1) - 1).argmax(1).to_vector<int64_t>()[0]);
  }
  EXPECT_EQ(nn::generate(m, prompt, {.new_tokens = 4, .temperature = 0.0}).to_vector<int64_t>(), row);
}

// A static cache (preallocated rows written at their positions, the count held read by the
// attention kernel) gives the growing cache's logits and tokens; it is for inference only.
TEST(NnGpt, AStaticCacheGivesTheGrowingCachesLogitsAndTokens) {
  manual_seed(10);
  nn::Gpt<VirtualDispatch> m(reference(), tiny());
  autograd::NoGradGuard no_grad;
  nn::KvCache growing, fixed = m.static_cache(2, 5);
  EXPECT_TRUE(fixed.is_static());
  for (const auto& [part, t] : {std::pair{std::vector<int64_t>{2, 5, 1, 0, 4, 4}, 3}, {{6, 3}, 1}, {{1, 2}, 1}}) {
    const Tensor a = m.forward(ids(part, 2, t), &growing), b = m.forward(ids(part, 2, t), &fixed);
    EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << "after " << growing.length() << " tokens";
    EXPECT_EQ(fixed.length(), growing.length());
  }
  EXPECT_STRATA_ERROR(m.forward(ids({1, 2}, 2, 1), &fixed), "KvCache", "1 more tokens after 5", "5 positions");
  for (const nn::GenerateOptions& o : {nn::GenerateOptions{.new_tokens = 4, .temperature = 0.0},
                                       nn::GenerateOptions{.new_tokens = 4, .temperature = 0.8, .top_k = 3, .seed = 5}}) {
    nn::GenerateOptions st = o;
    st.static_cache = true;
    EXPECT_EQ(nn::generate(m, ids({3, 1}, 1, 2), st).to_vector<int64_t>(),
              nn::generate(m, ids({3, 1}, 1, 2), o).to_vector<int64_t>())
        << "temperature " << o.temperature;
  }
  EXPECT_STRATA_ERROR(nn::generate(m, ids({3, 1}, 1, 2), {.new_tokens = 5, .static_cache = true}), "generate",
                      "block_size 6");
  // Graph decoding captures a static- or direct-mode step on a backend with graphs.
  EXPECT_STRATA_ERROR(nn::generate(m, ids({3, 1}, 1, 2), {.new_tokens = 2, .graph = true}), "generate",
                      "static or direct mode", "cuda");
}

TEST(NnGpt, AStaticCacheRefusesTraining) {
  nn::Gpt<VirtualDispatch> m(reference(), tiny());
  nn::KvCache fixed = m.static_cache(1, 4);
  EXPECT_STRATA_ERROR(m.forward(ids({1, 2}, 1, 2), &fixed), "GPT", "static", "inference", "NoGradGuard");
  EXPECT_STRATA_ERROR(m.static_cache(1, 7), "GPT", "static cache", "block_size 6");
}

TEST(NnGpt, WhatCannotRunIsAClearError) {
  nn::Gpt<VirtualDispatch> m(reference(), tiny());
  EXPECT_STRATA_ERROR(m.forward(ids({1, 2, 3, 4, 5, 6, 0}, 1, 7)), "GPT", "7 tokens", "block_size 6");
  EXPECT_STRATA_ERROR(m.forward(ids({1, 9}, 1, 2)), "index_select", "index", "9");
  EXPECT_STRATA_ERROR(m.forward(Tensor::from_vector<int64_t>({1, 2}, {2})), "GPT", "[B, T]");
  nn::GptConfig bad = tiny();
  bad.n_head = 3;
  EXPECT_STRATA_ERROR((nn::Gpt<VirtualDispatch>(reference(), bad)), "n_embd 8", "n_head 3");
  // Direct mode plans its steps once per length: it decodes over a static cache, not a growing one.
  nn::Gpt<ops::Direct<Ref>> d(ops::Direct<Ref>(), tiny());
  nn::KvCache cache;
  EXPECT_STRATA_ERROR(d.forward(ids({1, 2}, 1, 2), &cache), "GPT", "growing key/value cache", "tape modes",
                      "static cache");
  EXPECT_STRATA_ERROR(d.forward(ids({1, 2, 3, 4, 5, 6, 0}, 1, 7)), "GPT", "7 tokens", "block_size 6");
}

}  // namespace
}  // namespace strata::testing
