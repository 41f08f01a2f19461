// GPT-2's layers as an nn::Model (nn::make_gpt): token ids in, [B, T, vocab] logits out,
// cross-entropy against the next ids; AdamW steps in the virtual and static modes bitwise alike,
// a checkpoint that resumes exactly in the other mode, and direct mode refused by name.
#include <gtest/gtest.h>

#include "nn_test_util.h"
#include "strata/core/factories.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/model.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

nn::GptConfig tiny() {
  nn::GptConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  return c;
}
std::unique_ptr<nn::Model> gpt(DispatchMode mode) {
  manual_seed(21);  // GPT-2's initialisation draws from the default generator
  return nn::make_gpt(tiny(), mode, "reference");
}
nn::OptimizerConfig adamw() {
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::adamw;
  oc.lr = 2e-2;
  oc.weight_decay = 0.1;
  return oc;
}
// A batch of windows of a repeating sequence and the ids after each.
std::pair<Tensor, Tensor> batch(int64_t shift) {
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < 8; ++t) {
      x.push_back((b + t + shift) % 11);
      y.push_back((b + t + shift + 1) % 11);
    }
  return {Tensor::from_vector(x, Shape{3, 8}), Tensor::from_vector(y, Shape{3, 8})};
}

TEST(NnGptModel, TrainsInTheTapeModesBitwiseAlike) {
  auto v = gpt(DispatchMode::virtual_call), s = gpt(DispatchMode::static_call);
  auto ov = v->make_optimizer(adamw()), os = s->make_optimizer(adamw());
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    const auto [x, y] = batch(step);
    const nn::StepResult rv = v->train_step(x, y, *ov), rs = s->train_step(x, y, *os);
    EXPECT_EQ(rv.logits.sizes(), Shape({3, 8, 11}));
    EXPECT_TRUE(bitwise_equal(rv.loss, rs.loss)) << "step " << step;
    (step == 0 ? first : last) = rv.loss.item();
  }
  EXPECT_LT(last, 0.5 * first) << "the next id of a repeating sequence is learnable";
  const auto sv = v->state_dict(), ss = s->state_dict();
  for (size_t i = 0; i < sv.size(); ++i) EXPECT_TRUE(bitwise_equal(sv[i].second, ss[i].second)) << sv[i].first;
  EXPECT_EQ(v->predict(batch(0).first).sizes(), Shape({3, 8, 11}));
}

TEST(NnGptModel, ACheckpointResumesExactlyInTheOtherMode) {
  TempDir dir;
  const std::string path = dir.file("gpt.safetensors");
  auto a = gpt(DispatchMode::static_call);
  auto oa = a->make_optimizer(adamw());
  for (int step = 0; step < 2; ++step) a->train_step(batch(step).first, batch(step).second, *oa);
  nn::save_checkpoint(path, a->module(), oa.get(), 2);
  manual_seed(99);  // other initial weights: the checkpoint must replace all of them
  auto b = nn::make_gpt(tiny(), DispatchMode::virtual_call, "reference");
  auto ob = b->make_optimizer(adamw());
  EXPECT_EQ(nn::load_checkpoint(path, b->module(), ob.get()).step, 2);
  for (int step = 2; step < 4; ++step) {
    const auto [x, y] = batch(step);
    EXPECT_TRUE(bitwise_equal(a->train_step(x, y, *oa).loss, b->train_step(x, y, *ob).loss)) << "step " << step;
  }
}

TEST(NnGptModel, WhatCannotRunIsAClearError) {
  EXPECT_STRATA_ERROR(nn::make_gpt(tiny(), DispatchMode::direct, "reference"), "direct and graph modes");
  auto m = gpt(DispatchMode::virtual_call);
  auto opt = m->make_optimizer(adamw());
  const auto [x, y] = batch(0);
  EXPECT_STRATA_ERROR(m->train_step(x, y.narrow(1, 0, 7), *opt), "cross_entropy", "one class per row");
  EXPECT_STRATA_ERROR(m->train_step(x, Tensor::from_vector<float>(std::vector<float>(24, 1.f), {3, 8}), *opt),
                      "class indices");
}

}  // namespace
}  // namespace strata::testing
