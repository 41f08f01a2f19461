// GPT-2's layers in direct mode (nn::make_gpt with DispatchMode::direct, and the modules
// themselves): AdamW training steps bitwise equal to the virtual and static modes on every CPU
// backend (loss, logits, every gradient and parameter after each step, gradients accumulated
// over two backward passes, a second sequence length), predict alike, checkpoints that resume
// exactly from direct mode in static mode and back, each plan made once per shape, bad input
// refused with the tape modes' messages, and mixed precision (f64 masters, f32 compute) alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "gpt_test_util.h"
#include "nn_test_util.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/core/factories.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/generate.h"
#include "strata/nn/model.h"
#include "strata/nn/policy.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;
using Ref = backends::ReferenceBackend;

// The CPU backends of this build that compute (null computes nothing).
std::vector<std::string> computing_cpu_backends() {
  std::vector<std::string> out;
  for (backends::Backend* b : backends::registry().for_device(DeviceType::cpu))
    if (b->name() != "null") out.emplace_back(b->name());
  return out;
}
// The message of the strata::Error fn throws ("" and a failure when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

// Every parameter of `want` and `got` (one network in two modes) has a gradient, bitwise alike.
void expect_same_grads(const nn::Module& want, const nn::Module& got, const std::string& what) {
  const nn::StateDict pw = want.named_parameters(), pg = got.named_parameters();
  ASSERT_EQ(pw.size(), pg.size());
  for (size_t i = 0; i < pw.size(); ++i) {
    ASSERT_TRUE(pg[i].second.grad().defined()) << what << ": " << pg[i].first;
    EXPECT_TRUE(bitwise_equal(pw[i].second.grad(), pg[i].second.grad())) << what << ": " << pg[i].first;
  }
}

TEST(NnGptDirect, TrainsBitwiseAlikeInEveryModeOnEveryCpuBackend) {
  std::string names;
  for (const std::string& backend : computing_cpu_backends()) names += " " + backend;
  std::printf("GPT in the virtual, static and direct modes on:%s\n", names.c_str());
  for (const std::string& backend : computing_cpu_backends()) {
    SCOPED_TRACE("backend " + backend);
    std::vector<std::unique_ptr<nn::Model>> models;
    std::vector<std::unique_ptr<nn::Optimizer>> opts;
    for (DispatchMode mode : kAllModes) {
      models.push_back(make_tiny_gpt(mode, backend));
      opts.push_back(models.back()->make_optimizer(gpt_adamw()));
    }
    for (int step = 0; step < 5; ++step) {
      // Step 3 is another shape: 2 rows of 5 tokens, planned anew in direct mode.
      const auto [x, y] = step == 3 ? gpt_batch(step, 2, 5) : gpt_batch(step);
      std::vector<StepOutputs> out;
      for (size_t i = 0; i < models.size(); ++i)
        out.push_back(snapshot(*models[i], models[i]->train_step(x, y, *opts[i])));
      expect_bitwise(out[0], out[1], "virtual vs static, step " + std::to_string(step));
      expect_bitwise(out[0], out[2], "virtual vs direct, step " + std::to_string(step));
    }
    const Tensor x = gpt_batch(7).first;
    const Tensor want = models[0]->predict(x);
    EXPECT_EQ(want.sizes(), Shape({3, 8, 11}));
    EXPECT_TRUE(bitwise_equal(models[2]->predict(x), want)) << "predict";
    models[2]->eval();
    EXPECT_TRUE(bitwise_equal(models[2]->predict(x), want)) << "predict in eval mode";
  }
}

TEST(NnGptDirect, GradientsAccumulateAsTheTapesDo) {
  // Two backward passes without zeroing: wte's weight then takes (existing + output
  // projection's) + embedding's, every other parameter existing + new, as the engine adds them.
  std::vector<StepOutputs> out;
  for (DispatchMode mode : kAllModes) {
    auto m = make_tiny_gpt(mode);
    m->module().zero_grad();
    nn::StepResult r;
    for (int pass = 0; pass < 2; ++pass) {
      const auto [x, y] = gpt_batch(pass);
      r = m->forward_loss(x, y);
      m->backward();
    }
    out.push_back(snapshot(*m, r));
  }
  expect_bitwise(out[0], out[1], "virtual vs static");
  expect_bitwise(out[0], out[2], "virtual vs direct");
}

TEST(NnGptDirect, ModulesForwardAndBackwardBitwiseInF64) {
  // The modules without a Model: the direct network's explicit backward from dL/dlogits against
  // the tape's from the same gradient, in f64 on the reference backend.
  manual_seed(5);
  nn::Gpt<ops::StaticDispatch<Ref>> s(ops::StaticDispatch<Ref>(), tiny_gpt(DType::f64));
  manual_seed(5);
  nn::Gpt<ops::Direct<Ref>> d(ops::Direct<Ref>(), tiny_gpt(DType::f64));
  const Tensor ids = gpt_batch(1, 2, 6).first;
  const Tensor cot = random_tensor({2, 6, 11}, DType::f64, 9);
  const Tensor ls = s.forward(ids), ld = d.forward(ids);
  EXPECT_TRUE(bitwise_equal(ls, ld)) << "logits";
  autograd::backward(ls, cot);
  EXPECT_FALSE(d.backward(cot).defined()) << "token ids have no gradient";
  expect_same_grads(s, d, "f64");
}

TEST(NnGptDirect, ThePaddedHeadNeverWritesIntoItsUsersGradient) {
  // dL/dlogits handed to the direct network by its user as the first V columns of rows of their
  // own, as wide as the padded vocabulary: the head reads them in place only when the buffer is the
  // step's (the loss's); a user's is copied, its other columns left as they were, and the
  // gradients are the tape's.
  nn::GptConfig c = tiny_gpt(DType::f64);
  c.vocab_multiple = 64;
  c.pad_head_min_rows = 1;
  manual_seed(5);
  nn::Gpt<ops::StaticDispatch<Ref>> s(ops::StaticDispatch<Ref>(), c);
  manual_seed(5);
  nn::Gpt<ops::Direct<Ref>> d(ops::Direct<Ref>(), c);
  const Tensor ids = gpt_batch(1, 2, 6).first;
  Tensor wide = full({2, 6, 64}, 7.0, DType::f64);
  copy_into(random_tensor({2, 6, 11}, DType::f64, 9), wide.narrow(2, 0, 11));
  const Tensor cot = wide.narrow(2, 0, 11);
  const Tensor ls = s.forward(ids);
  d.forward(ids);
  autograd::backward(ls, cot);
  d.backward(cot);
  expect_same_grads(s, d, "f64, a user's dL/dlogits");
  for (double v : wide.narrow(2, 11, 53).contiguous().to_vector<double>()) ASSERT_EQ(v, 7.0) << "the user's columns";
}

TEST(NnGptDirect, NonContiguousIdsAreReadAfreshEachForward) {
  // Ids seen through a transpose: the tape copies them (contiguous()) at each call, direct mode
  // into a buffer of its plan at each run, so new values written into them are the ones used.
  manual_seed(6);
  nn::Gpt<ops::StaticDispatch<Ref>> s(ops::StaticDispatch<Ref>(), tiny_gpt());
  manual_seed(6);
  nn::Gpt<ops::Direct<Ref>> d(ops::Direct<Ref>(), tiny_gpt());
  const Tensor base = gpt_batch(0, 5, 2).first;  // [5, 2]
  const Tensor ids = base.permute({1, 0});        // [2, 5], not contiguous
  ASSERT_FALSE(ids.is_contiguous());
  for (int round = 0; round < 2; ++round) {
    copy_into(gpt_batch(3 * round, 5, 2).first, base);
    const Tensor ls = s.forward(ids), ld = d.forward(ids);
    EXPECT_TRUE(bitwise_equal(ls, ld)) << "round " << round;
    const Tensor cot = random_tensor({2, 5, 11}, DType::f32, 10 + round);
    s.zero_grad();
    d.zero_grad();
    autograd::backward(ls, cot);
    d.backward(cot);
    expect_same_grads(s, d, "round " + std::to_string(round));
  }
  EXPECT_EQ(d.plans_made(), 1);
}

TEST(NnGptDirect, ACheckpointResumesExactlyAcrossTheModes) {
  TempDir dir;
  for (const auto& [from, to] : {std::pair{DispatchMode::direct, DispatchMode::static_call},
                                 std::pair{DispatchMode::static_call, DispatchMode::direct}}) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(from)) + " to " + std::string(ops::dispatch_mode_name(to)));
    const std::string path = dir.file("gpt.safetensors");
    auto a = make_tiny_gpt(from);
    auto oa = a->make_optimizer(gpt_adamw());
    for (int step = 0; step < 2; ++step) a->train_step(gpt_batch(step).first, gpt_batch(step).second, *oa);
    nn::save_checkpoint(path, a->module(), oa.get(), 2);
    manual_seed(99);  // other initial weights: the checkpoint must replace all of them
    auto b = nn::make_gpt(tiny_gpt(), to, "reference");
    auto ob = b->make_optimizer(gpt_adamw());
    EXPECT_EQ(nn::load_checkpoint(path, b->module(), ob.get()).step, 2);
    for (int step = 2; step < 4; ++step) {
      const auto [x, y] = gpt_batch(step);
      const StepOutputs sa = snapshot(*a, a->train_step(x, y, *oa)), sb = snapshot(*b, b->train_step(x, y, *ob));
      expect_bitwise(sa, sb, "step " + std::to_string(step));
    }
  }
}

TEST(NnGptDirect, PlansOnceAndSharesOneArenaPerShape) {
  auto m = make_tiny_gpt(DispatchMode::direct);
  auto opt = m->make_optimizer(gpt_adamw());
  EXPECT_EQ(m->step_memory().buffers, 0);
  m->train_step(gpt_batch(0).first, gpt_batch(0).second, *opt);
  const ops::direct::StepMemoryStats st = m->step_memory();
  EXPECT_GT(st.buffers, 50);  // every activation, saved statistic and gradient of two blocks
  EXPECT_GE(st.arena_bytes, st.lower_bound);
  EXPECT_LT(st.arena_bytes, st.sum_bytes) << "buffers share the arena";
  using P = nn::Direct<Ref>;
  auto plans = [&] {
    int64_t n = 0, modules = 0;
    for (auto& [name, mod] : m->module().named_modules()) {
      int64_t k = -1;
      if (auto* l = dynamic_cast<nn::Linear<P>*>(mod); l && name.find(".mlp.") != std::string::npos) {
        EXPECT_EQ(l->plans_made(), 0) << name << ": the MLP's fused op plans for its projections";
        continue;
      }
      if (auto* l = dynamic_cast<nn::Linear<P>*>(mod)) k = l->plans_made();
      if (auto* g = dynamic_cast<nn::GptMlp<P>*>(mod)) k = g->plans_made();
      if (auto* e = dynamic_cast<nn::Embedding<P>*>(mod)) k = e->plans_made();
      if (auto* l = dynamic_cast<nn::LayerNorm<P>*>(mod)) k = l->plans_made();
      if (auto* a = dynamic_cast<nn::CausalSelfAttention<P>*>(mod)) k = a->plans_made();
      if (auto* g = dynamic_cast<nn::Gpt<P>*>(mod)) k = g->plans_made();
      if (k < 0) continue;
      EXPECT_EQ(k, 1) << name << " planned more than once for one shape";
      n += k;
      ++modules;
    }
    EXPECT_EQ(modules, 2 * (2 + 2 + 1 + 1) + 2 + 1 + 1) << "every planning module counted";
    return n;
  };
  const int64_t first = plans();
  for (int step = 1; step < 4; ++step)  // new tensors each step, copied into the planned buffers
    m->train_step(gpt_batch(step).first, gpt_batch(step).second, *opt);
  EXPECT_EQ(plans(), first) << "later steps of the shape replan nothing";
  EXPECT_EQ(m->step_memory().buffers, st.buffers);
  EXPECT_EQ(m->step_memory().arena_bytes, st.arena_bytes);
}

TEST(NnGptDirect, BadInputGetsTheTapeModesMessages) {
  auto s = make_tiny_gpt(DispatchMode::static_call), d = make_tiny_gpt(DispatchMode::direct);
  auto os = s->make_optimizer(gpt_adamw()), od = d->make_optimizer(gpt_adamw());
  const auto [x, y] = gpt_batch(0);
  std::vector<int64_t> bad = x.to_vector<int64_t>();
  bad[13] = 11;  // the vocabulary's size: one past its last id
  const Tensor out_of_range = Tensor::from_vector(bad, x.sizes());
  const Tensor too_long = gpt_batch(0, 1, 9).first;
  const Tensor rank1 = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  const std::vector<std::pair<std::string, std::function<void(nn::Model&, nn::Optimizer&)>>> cases = {
      {"ids of rank 1", [&](nn::Model& m, nn::Optimizer&) { m.predict(rank1); }},
      {"an id out of range", [&](nn::Model& m, nn::Optimizer& o) { m.train_step(out_of_range, y, o); }},
      {"a sequence longer than block_size", [&](nn::Model& m, nn::Optimizer&) { m.predict(too_long); }},
      {"targets of another shape", [&](nn::Model& m, nn::Optimizer& o) { m.train_step(x, y.narrow(1, 0, 7), o); }},
  };
  // Before any step (a new shape, refused while planning) and after one (planned: the kernel's check).
  for (int round = 0; round < 2; ++round) {
    for (const auto& [what, run] : cases) {
      const std::string want = error_of([&] { run(*s, *os); }), got = error_of([&] { run(*d, *od); });
      EXPECT_FALSE(want.empty()) << what;
      EXPECT_EQ(got, want) << what << ", round " << round;
    }
    // Training goes on alike after the refusals.
    const StepOutputs a = snapshot(*s, s->train_step(x, y, *os)), b = snapshot(*d, d->train_step(x, y, *od));
    expect_bitwise(a, b, "after the bad input, round " + std::to_string(round));
  }
  EXPECT_STRATA_ERROR(d->predict(out_of_range), "index_select", "index[13] = 11", "size 11");
}

// Targets equal to ModelOptions::ignore_index (a padded row's tail, a prompt's first position)
// leave the language model's loss over its [B, T, V] logits, as torch.nn.CrossEntropyLoss's
// ignore_index: bitwise alike in every mode on every CPU backend, and the mean over the kept
// positions of logsumexp - logit[target], computed here from the step's logits.
TEST(NnGptDirect, IgnoredTargetsLeaveTheLossAlikeInEveryMode) {
  for (const std::string& backend : computing_cpu_backends()) {
    for (const int64_t ignore : {int64_t{-100}, int64_t{4}}) {  // 4: an id of the vocabulary
      SCOPED_TRACE("backend " + backend + ", ignore_index " + std::to_string(ignore));
      nn::ModelOptions o;
      o.ignore_index = ignore;
      std::vector<std::unique_ptr<nn::Model>> models;
      std::vector<std::unique_ptr<nn::Optimizer>> opts;
      for (DispatchMode mode : kAllModes) {
        manual_seed(21);
        models.push_back(nn::make_gpt(tiny_gpt(), mode, backend, o));
        opts.push_back(models.back()->make_optimizer(gpt_adamw()));
      }
      for (int step = 0; step < 3; ++step) {
        const auto [x, y0] = gpt_batch(step);
        std::vector<int64_t> yv = y0.to_vector<int64_t>();
        for (int64_t t = 5; t < 8; ++t) yv[t] = ignore;  // row 0's padded tail
        yv[2 * 8] = ignore;                              // row 2's first position
        const Tensor y = Tensor::from_vector(yv, y0.sizes());
        std::vector<StepOutputs> out;
        for (size_t i = 0; i < models.size(); ++i)
          out.push_back(snapshot(*models[i], models[i]->train_step(x, y, *opts[i])));
        expect_bitwise(out[0], out[1], "virtual vs static, step " + std::to_string(step));
        expect_bitwise(out[0], out[2], "virtual vs direct, step " + std::to_string(step));
        const std::vector<double> logits = out[0].logits.to_vector<double>();
        double total = 0;
        int64_t kept = 0;
        for (size_t r = 0; r < yv.size(); ++r) {
          if (yv[r] == ignore) continue;
          double m = -INFINITY, sum = 0;
          for (int64_t c = 0; c < 11; ++c) m = std::max(m, logits[r * 11 + c]);
          for (int64_t c = 0; c < 11; ++c) sum += std::exp(logits[r * 11 + c] - m);
          total += m + std::log(sum) - logits[r * 11 + yv[r]];
          ++kept;
        }
        EXPECT_LT(kept, 24 - 4 + 1);
        EXPECT_NEAR(out[0].loss.item(), total / static_cast<double>(kept), 1e-5) << "step " << step;
      }
      // Every target ignored: NaN (PyTorch 2.x's 0/0) and zero gradients, in every mode.
      const auto [x, y0] = gpt_batch(0);
      const Tensor all = Tensor::from_vector(std::vector<int64_t>(24, ignore), y0.sizes());
      for (auto& m : models) {
        m->module().zero_grad();
        EXPECT_TRUE(std::isnan(m->forward_loss(x, all).loss.item())) << ops::dispatch_mode_name(m->mode());
        m->backward();
        for (auto& [name, p] : m->module().named_parameters())
          for (double g : p.grad().to_vector<double>()) ASSERT_EQ(g, 0.0) << name;
      }
    }
  }
}

// A negative target that is not the ignore index is refused alike in every mode.
TEST(NnGptDirect, ANegativeTargetOtherThanTheIgnoreIndexIsRefused) {
  nn::ModelOptions o;
  o.ignore_index = 4;
  const auto [x, y0] = gpt_batch(0);
  std::vector<int64_t> yv = y0.to_vector<int64_t>();
  yv[9] = -100;
  const Tensor y = Tensor::from_vector(yv, y0.sizes());
  for (DispatchMode mode : kAllModes) {
    auto m = nn::make_gpt(tiny_gpt(), mode, "reference", o);
    EXPECT_STRATA_ERROR(m->forward_loss(x, y), "label -100 at position 9", "ignore index (4)");
  }
}

// Mixed precision, checked as the CNNs' is (mixed_precision_test.cpp): f64 masters with f32 compute on
// the reference backend, the mechanism of the cuda backend's bf16 training.
Tensor as(const Tensor& t, DType dt) {
  Tensor o = Tensor::empty(t.sizes(), dt, Device::cpu());
  copy_into(t, o);
  return o;
}
nn::ModelOptions f32_compute() {
  nn::ModelOptions o;
  o.compute_dtype = DType::f32;
  return o;
}

TEST(NnGptDirect, MixedPrecisionTrainsBitwiseAlikeInEveryMode) {
  std::vector<std::unique_ptr<nn::Model>> models;
  std::vector<std::unique_ptr<nn::Optimizer>> opts;
  for (DispatchMode mode : kAllModes) {
    manual_seed(21);
    models.push_back(nn::make_gpt(tiny_gpt(DType::f64), mode, "reference", f32_compute()));
    opts.push_back(models.back()->make_optimizer(gpt_adamw()));
  }
  EXPECT_NE(models[2]->describe().find("f64 parameters, f32 compute"), std::string::npos) << models[2]->describe();
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = gpt_batch(step);
    std::vector<StepOutputs> out;
    for (size_t i = 0; i < models.size(); ++i)
      out.push_back(snapshot(*models[i], models[i]->train_step(x, y, *opts[i])));
    EXPECT_EQ(out[2].loss.dtype(), DType::f64) << "the loss is computed in the masters' dtype";
    for (const auto& [name, g] : out[2].grads) EXPECT_EQ(g.dtype(), DType::f64) << name;
    expect_bitwise(out[0], out[1], "virtual vs static, step " + std::to_string(step));
    expect_bitwise(out[0], out[2], "virtual vs direct, step " + std::to_string(step));
  }
  EXPECT_TRUE(bitwise_equal(models[2]->predict(gpt_batch(5).first), models[0]->predict(gpt_batch(5).first)));
}

TEST(NnGptDirect, MixedPrecisionMatchesAnF32ModelOfTheRoundedWeights) {
  for (DispatchMode mode : {DispatchMode::static_call, DispatchMode::direct}) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    manual_seed(21);
    auto mixed = nn::make_gpt(tiny_gpt(DType::f64), mode, "reference", f32_compute());
    auto plain = nn::make_gpt(tiny_gpt(), mode, "reference");
    nn::StateDict sd;
    for (auto& [n, t] : mixed->state_dict()) sd.emplace_back(n, as(t, DType::f32));
    plain->load_state_dict(sd);
    const auto [x, y] = gpt_batch(2);
    auto step = [&](nn::Model& model) {
      const nn::StepResult r = model.forward_loss(x, y);
      model.backward();
      return snapshot(model, r);
    };
    const StepOutputs m = step(*mixed), f = step(*plain);
    EXPECT_EQ(m.logits.dtype(), DType::f64);
    // The embeddings are summed in f64 before the conversion, and the gradients of wte's and wpe's
    // weights summed in f64 after it: agreement to f32's precision, amplified a little on the way.
    EXPECT_TRUE(close(as(m.loss, DType::f32), f.loss, 1e-5));
    EXPECT_TRUE(close(as(m.logits, DType::f32), f.logits, 1e-5));
    ASSERT_EQ(m.grads.size(), f.grads.size());
    for (size_t i = 0; i < m.grads.size(); ++i) {
      const auto& [name, g] = m.grads[i];
      ASSERT_TRUE(g.defined()) << name;
      EXPECT_EQ(g.dtype(), DType::f64) << name << ": master gradients stay in the masters' dtype";
      EXPECT_TRUE(close(as(g, DType::f32), f.grads[i].second, 1e-4)) << name;
    }
  }
}

// Direct mode decodes over a static cache: the prompt's step and each one-token step planned
// once (bound to the cache and its slots), every logit bitwise the static mode's over the same
// cache, and generate's tokens alike, greedy and sampled; on every CPU backend.
TEST(NnGptDirect, DecodesOverAStaticCacheAsStaticModeDoes) {
  for (const std::string& backend : computing_cpu_backends()) {
    SCOPED_TRACE(backend);
    nn::with_policy(DispatchMode::direct, backend, [&](const auto& pd) {
      using PD = std::decay_t<decltype(pd)>;
      if constexpr (nn::is_direct_v<PD>) {
        using PS = ops::StaticDispatch<typename PD::Backend>;
        manual_seed(21);
        nn::Gpt<PS> sg(PS(*pd.impl), tiny_gpt());
        nn::Gpt<PD> dg(pd, tiny_gpt());
        dg.load_state_dict(sg.state_dict());
        autograd::NoGradGuard no_grad;
        nn::KvCache cs = sg.static_cache(2, 8), cd = dg.static_cache(2, 8);
        const Tensor prompt = gpt_batch(0, 2, 3).first;
        EXPECT_TRUE(bitwise_equal(sg.forward(prompt, &cs), dg.forward(prompt, &cd))) << "prompt";
        for (int64_t t = 0; t < 5; ++t) {
          const Tensor next = gpt_batch(t + 3, 2, 1).first;
          EXPECT_TRUE(bitwise_equal(sg.forward(next, &cs), dg.forward(next, &cd))) << "token " << t;
        }
        for (const nn::GenerateOptions o :
             {nn::GenerateOptions{.new_tokens = 5, .temperature = 0.0},
              nn::GenerateOptions{.new_tokens = 5, .temperature = 0.8, .top_k = 4, .seed = 3}}) {
          const Tensor ids = gpt_batch(1, 2, 3).first;
          nn::GenerateOptions fixed = o;
          fixed.static_cache = true;
          EXPECT_TRUE(bitwise_equal(nn::generate(sg, ids, fixed), nn::generate(dg, ids, o)))
              << "generate, temperature " << o.temperature;
        }
      }
    });
  }
}

TEST(NnGptDirect, DecodingRefusesAGrowingCacheAndABackward) {
  nn::Gpt<ops::Direct<Ref>> d(ops::Direct<Ref>(), tiny_gpt());
  nn::KvCache growing;
  const Tensor ids = gpt_batch(0, 1, 3).first;
  EXPECT_STRATA_ERROR(d.forward(ids, &growing), "GPT", "growing key/value cache", "static cache");
  EXPECT_STRATA_ERROR(nn::generate(d, ids, {.new_tokens = 6}), "generate", "static cache",
                      "direct mode decodes over one", "block_size 8");
  {
    autograd::NoGradGuard no_grad;
    nn::KvCache cache = d.static_cache(1, 8);
    d.forward(ids, &cache);
  }
  // The last block's MLP is the first to refuse (its layer norm ran in its product's prologue).
  EXPECT_STRATA_ERROR(d.backward(random_tensor({1, 3, 11}, DType::f32, 1)), "MLP", "no backward",
                      "decoding step");
  EXPECT_STRATA_ERROR(nn::make_gpt(tiny_gpt(), DispatchMode::graph, "reference"), "graph mode", "reference");
}

// The output projection's padded vocabulary (GptConfig::vocab_multiple) is the model's own
// business: the logits are [B, T, V] (the first V columns of rows of 64, as the module hands them
// out), and training follows an unpadded model of the same weights, in every mode.
TEST(NnGptDirect, ThePaddedVocabularyIsInvisible) {
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)));
    std::unique_ptr<nn::Model> m[2];
    std::unique_ptr<nn::Optimizer> o[2];
    for (int i = 0; i < 2; ++i) {
      nn::GptConfig c = tiny_gpt(DType::f64);
      c.vocab_multiple = i == 0 ? 64 : 1;
      c.pad_head_min_rows = 1;
      EXPECT_EQ(c.padded_vocab(), i == 0 ? 64 : 11);
      manual_seed(21);
      m[i] = nn::make_gpt(c, mode, "reference");
      o[i] = m[i]->make_optimizer(gpt_adamw());
    }
    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto [x, y] = gpt_batch(step);
      const StepOutputs a = snapshot(*m[0], m[0]->train_step(x, y, *o[0]));
      const StepOutputs b = snapshot(*m[1], m[1]->train_step(x, y, *o[1]));
      EXPECT_EQ(a.logits.sizes(), Shape({3, 8, 11}));
      EXPECT_LT(max_abs_diff(a.loss, b.loss), 1e-12);
      EXPECT_LT(max_abs_diff(a.logits, b.logits), 1e-12);
      for (size_t i = 0; i < a.grads.size(); ++i)
        EXPECT_LT(max_abs_diff(a.grads[i].second, b.grads[i].second), 1e-12) << a.grads[i].first;
    }
    const Tensor logits = m[0]->module().forward(gpt_batch(0).first);
    EXPECT_EQ(logits.sizes(), Shape({3, 8, 11}));
    EXPECT_EQ(logits.strides()[1], 64) << "rows of the padded vocabulary";
  }
  // Padding only from pad_head_min_rows rows (batch times tokens) on: below, the copy of the
  // weight it needs would cost more than the aligned product saves (a decoding step's one row).
  for (const int64_t min_rows : {int64_t{24}, int64_t{25}}) {
    nn::GptConfig c = tiny_gpt(DType::f64);
    c.vocab_multiple = 64;
    c.pad_head_min_rows = min_rows;
    auto m = nn::make_gpt(c, DispatchMode::virtual_call, "reference");
    const Tensor logits = m->module().forward(gpt_batch(0).first);  // 3 x 8 = 24 rows
    EXPECT_EQ(logits.strides()[1], min_rows <= 24 ? 64 : 11) << "pad_head_min_rows " << min_rows;
  }
  nn::GptConfig negative = tiny_gpt();
  negative.pad_head_min_rows = -1;
  const std::string n = error_of([&] { nn::make_gpt(negative); });
  EXPECT_NE(n.find("GPT: pad_head_min_rows must not be negative, got -1"), std::string::npos) << n;
  nn::GptConfig bad = tiny_gpt();
  bad.vocab_multiple = 0;
  const std::string e = error_of([&] { nn::make_gpt(bad); });
  EXPECT_NE(e.find("GPT: vocab_multiple must be at least 1"), std::string::npos) << e;
}

}  // namespace
}  // namespace strata::testing
