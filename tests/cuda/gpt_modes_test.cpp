// GPT through nn::Model on the GPU in all four dispatch modes: AdamW steps of a tiny GPT give
// bitwise the same loss, logits and parameters in virtual, static, direct and graph mode (the
// graph captured once per shape and replayed, a second sequence length in between), in f32 and
// with bf16 compute over f32 master weights; predict alike; and the first step close to the
// reference backend's (the kernels differ, so not bitwise). Decoding in every way strata has gives
// the same tokens.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "nn/gpt_test_util.h"
#include "strata/autograd/grad_mode.h"
#include "strata/backends/api/registry.h"
#include "strata/nn/generate.h"
#include "strata/nn/nn.h"

namespace strata::testing {
namespace {

class CudaGptModes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_skip_reason().empty()) GTEST_SKIP() << "no usable GPU: " << gpu_skip_reason();
  }
};

// A step's results copied to the host at once (graph mode's buffers are overwritten by the
// next replay).
struct Snapshot {
  Tensor loss, logits;
  std::vector<std::pair<std::string, Tensor>> state;
};
Snapshot take(nn::Model& m, const nn::StepResult& r) {
  Snapshot s{r.loss.to(Device::cpu()), r.logits.to(Device::cpu()), {}};
  for (auto& [n, t] : m.state_dict()) s.state.emplace_back(n, t.to(Device::cpu()));
  return s;
}
void expect_same(const Snapshot& a, const Snapshot& b, const std::string& what) {
  EXPECT_TRUE(bitwise_equal(a.loss, b.loss)) << what << ": loss " << a.loss.item() << " vs " << b.loss.item();
  EXPECT_TRUE(bitwise_equal(a.logits, b.logits)) << what << ": logits";
  ASSERT_EQ(a.state.size(), b.state.size());
  for (size_t i = 0; i < a.state.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a.state[i].second, b.state[i].second)) << what << ": " << a.state[i].first;
}

const ops::DispatchMode kFourModes[] = {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call,
                                        ops::DispatchMode::direct, ops::DispatchMode::graph};

// rows: the batch's sequences of 8 tokens; 16 (128 rows) puts the head over the padded
// vocabulary (nn::GptConfig::pad_head_min_rows), where direct mode's dL/dlogits are the first
// columns of padded rows.
void four_modes_alike(const nn::ModelOptions& o, nn::GptConfig c, int64_t rows = 3) {
  c.compute_dtype = o.compute_dtype;
  std::vector<std::unique_ptr<nn::Model>> models;
  std::vector<std::unique_ptr<nn::Optimizer>> opts;
  for (ops::DispatchMode mode : kFourModes) {
    manual_seed(21);
    models.push_back(nn::make_gpt(c, mode, "cuda", o));
    opts.push_back(models.back()->make_optimizer(gpt_adamw()));
  }
  for (int step = 0; step < 6; ++step) {
    // Steps 3 and 4 are another shape (a second graph), step 5 the first shape's graph again.
    const auto [x, y] = (step == 3 || step == 4) ? gpt_batch(step, 2, 5) : gpt_batch(step, rows);
    std::vector<Snapshot> out;
    for (size_t i = 0; i < models.size(); ++i) out.push_back(take(*models[i], models[i]->train_step(x, y, *opts[i])));
    for (size_t i = 1; i < out.size(); ++i)
      expect_same(out[0], out[i],
                  std::string(ops::dispatch_mode_name(kFourModes[i])) + " vs virtual, step " + std::to_string(step));
  }
  const Tensor x = gpt_batch(7).first;
  const Tensor want = models[0]->predict(x).to(Device::cpu());
  for (size_t i = 1; i < models.size(); ++i)
    EXPECT_TRUE(bitwise_equal(models[i]->predict(x).to(Device::cpu()), want))
        << ops::dispatch_mode_name(kFourModes[i]) << " predict";
}

TEST_F(CudaGptModes, FourModesTrainBitwiseAlikeInF32) { four_modes_alike({}, tiny_gpt()); }

TEST_F(CudaGptModes, FourModesTrainBitwiseAlikeWithBf16Compute) {
  nn::ModelOptions o;
  o.compute_dtype = DType::bf16;
  four_modes_alike(o, tiny_gpt());
}

TEST_F(CudaGptModes, FourModesTrainBitwiseAlikeOverThePaddedHead) {
  nn::ModelOptions o;
  four_modes_alike(o, tiny_gpt(), 16);
  o.compute_dtype = DType::bf16;
  four_modes_alike(o, tiny_gpt(), 16);
}

TEST_F(CudaGptModes, FirstStepIsCloseToTheReference) {
  // The step's forward (loss and logits, before the update): the kernels differ from the
  // reference's, so close, not bitwise.
  manual_seed(21);
  auto gpu = nn::make_gpt(tiny_gpt(), ops::DispatchMode::graph, "cuda");
  manual_seed(21);
  auto ref = nn::make_gpt(tiny_gpt(), ops::DispatchMode::static_call, "reference");
  auto og = gpu->make_optimizer(gpt_adamw()), orf = ref->make_optimizer(gpt_adamw());
  const auto [x, y] = gpt_batch(0);
  const nn::StepResult rg = gpu->train_step(x, y, *og), rr = ref->train_step(x, y, *orf);
  EXPECT_NEAR(rg.loss.item(), rr.loss.item(), 1e-5 * std::abs(rr.loss.item())) << "loss";
  const std::vector<float> a = rg.logits.to(Device::cpu()).to_vector<float>(), b = rr.logits.to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-5) << "logits[" << k << "]";
}

// Decoding on the GPU in every way strata has: the growing cache (virtual), the static cache in
// static and direct mode (direct's logits bitwise static's at every step) and each of those two
// steps captured as a CUDA graph and replayed per token; greedy and sampled tokens alike.
TEST_F(CudaGptModes, EveryWayOfDecodingGivesTheSameTokens) {
  using Cuda = backends::CudaBackend;
  using PS = ops::StaticDispatch<Cuda>;
  using PD = ops::Direct<Cuda>;
  manual_seed(21);
  nn::Gpt<PS> sg(PS(), tiny_gpt());
  nn::Gpt<PD> dg(PD(), tiny_gpt());
  nn::Gpt<ops::VirtualDispatch> vg(ops::VirtualDispatch(backends::registry().get("cuda")), tiny_gpt());
  dg.load_state_dict(sg.state_dict());
  vg.load_state_dict(sg.state_dict());
  {
    autograd::NoGradGuard no_grad;
    nn::KvCache cs = sg.static_cache(2, 8), cd = dg.static_cache(2, 8);
    const Tensor prompt = gpt_batch(0, 2, 3).first.to(Device::cuda());
    EXPECT_TRUE(same_values(to_cpu(sg.forward(prompt, &cs)), to_cpu(dg.forward(prompt, &cd)))) << "prompt";
    for (int64_t t = 0; t < 4; ++t) {
      const Tensor next = gpt_batch(t + 3, 2, 1).first.to(Device::cuda());
      EXPECT_TRUE(same_values(to_cpu(sg.forward(next, &cs)), to_cpu(dg.forward(next, &cd)))) << "token " << t;
    }
  }
  const Tensor ids = gpt_batch(1, 2, 3).first;
  for (const double temperature : {0.0, 0.8}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    const nn::GenerateOptions o{.new_tokens = 5, .temperature = temperature, .top_k = 4, .seed = 3};
    nn::GenerateOptions fixed = o, graph = o;
    fixed.static_cache = true;
    graph.graph = true;
    const std::vector<int64_t> want = nn::generate(vg, ids, o).to_vector<int64_t>();
    EXPECT_EQ(nn::generate(sg, ids, fixed).to_vector<int64_t>(), want) << "static, static cache";
    EXPECT_EQ(nn::generate(dg, ids, o).to_vector<int64_t>(), want) << "direct";
    EXPECT_EQ(nn::generate(sg, ids, graph).to_vector<int64_t>(), want) << "graph of the static-mode step";
    EXPECT_EQ(nn::generate(dg, ids, graph).to_vector<int64_t>(), want) << "graph of the direct-mode step";
  }
}

}  // namespace
}  // namespace strata::testing
