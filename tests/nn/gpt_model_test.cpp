// GPT-2's layers as an nn::Model (nn::make_gpt): token ids in, [B, T, vocab] logits out,
// cross-entropy against the next ids; AdamW steps in the virtual and static modes bitwise alike,
// a checkpoint that resumes exactly in the other mode, and clear errors (direct mode:
// gpt_direct_test.cpp).
#include <gtest/gtest.h>

#include "gpt_test_util.h"
#include "nn_test_util.h"
#include "strata/core/factories.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/model.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

TEST(NnGptModel, TrainsInTheTapeModesBitwiseAlike) {
  auto v = make_tiny_gpt(DispatchMode::virtual_call), s = make_tiny_gpt(DispatchMode::static_call);
  auto ov = v->make_optimizer(gpt_adamw()), os = s->make_optimizer(gpt_adamw());
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    const auto [x, y] = gpt_batch(step);
    const nn::StepResult rv = v->train_step(x, y, *ov), rs = s->train_step(x, y, *os);
    EXPECT_EQ(rv.logits.sizes(), Shape({3, 8, 11}));
    EXPECT_TRUE(bitwise_equal(rv.loss, rs.loss)) << "step " << step;
    (step == 0 ? first : last) = rv.loss.item();
  }
  EXPECT_LT(last, 0.5 * first) << "the next id of a repeating sequence is learnable";
  const auto sv = v->state_dict(), ss = s->state_dict();
  for (size_t i = 0; i < sv.size(); ++i) EXPECT_TRUE(bitwise_equal(sv[i].second, ss[i].second)) << sv[i].first;
  EXPECT_EQ(v->predict(gpt_batch(0).first).sizes(), Shape({3, 8, 11}));
}

TEST(NnGptModel, ACheckpointResumesExactlyInTheOtherMode) {
  TempDir dir;
  const std::string path = dir.file("gpt.safetensors");
  auto a = make_tiny_gpt(DispatchMode::static_call);
  auto oa = a->make_optimizer(gpt_adamw());
  for (int step = 0; step < 2; ++step) a->train_step(gpt_batch(step).first, gpt_batch(step).second, *oa);
  nn::save_checkpoint(path, a->module(), oa.get(), 2);
  manual_seed(99);  // other initial weights: the checkpoint must replace all of them
  auto b = nn::make_gpt(tiny_gpt(), DispatchMode::virtual_call, "reference");
  auto ob = b->make_optimizer(gpt_adamw());
  EXPECT_EQ(nn::load_checkpoint(path, b->module(), ob.get()).step, 2);
  for (int step = 2; step < 4; ++step) {
    const auto [x, y] = gpt_batch(step);
    EXPECT_TRUE(bitwise_equal(a->train_step(x, y, *oa).loss, b->train_step(x, y, *ob).loss)) << "step " << step;
  }
}

// Token ids are what GPT reads: its input buffer holds i64 (in direct mode the planned buffer that
// a step reads in place), while a network of values keeps the compute dtype.
TEST(NnGptModel, TheInputBufferHoldsTokenIdsInEveryMode) {
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(ops::dispatch_mode_name(mode));
    auto m = make_tiny_gpt(mode);
    auto opt = m->make_optimizer(gpt_adamw());
    const auto [x, y] = gpt_batch(0);
    const Tensor buf = m->input_buffer(x.sizes());
    EXPECT_EQ(buf.dtype(), DType::i64);
    EXPECT_EQ(buf.sizes(), x.sizes());
    copy_into(x, buf);
    auto ref = make_tiny_gpt(mode);
    auto ref_opt = ref->make_optimizer(gpt_adamw());
    EXPECT_TRUE(bitwise_equal(m->train_step(buf, y, *opt).loss, ref->train_step(x, y, *ref_opt).loss));
    auto values = nn::make_lenet(nn::LeNetConfig{}, mode, "reference");
    EXPECT_EQ(values->input_buffer({2, 1, 28, 28}).dtype(), DType::f32);
  }
}

TEST(NnGptModel, WhatCannotRunIsAClearError) {
  nn::ModelOptions mixed;
  mixed.compute_dtype = DType::bf16;
  nn::GptConfig f16 = tiny_gpt();
  f16.compute_dtype = DType::f16;
  EXPECT_STRATA_ERROR(nn::make_gpt(f16, DispatchMode::static_call, "reference", mixed), "make_gpt",
                      "ModelOptions::compute_dtype bf16", "GptConfig::compute_dtype f16", "disagree");
  f16.compute_dtype = DType::i32;
  EXPECT_STRATA_ERROR(nn::make_gpt(f16, DispatchMode::static_call, "reference"), "GPT", "compute_dtype must be floating",
                      "i32");
  auto m = make_tiny_gpt(DispatchMode::virtual_call);
  auto opt = m->make_optimizer(gpt_adamw());
  const auto [x, y] = gpt_batch(0);
  EXPECT_STRATA_ERROR(m->train_step(x, y.narrow(1, 0, 7), *opt), "cross_entropy", "one class per row");
  EXPECT_STRATA_ERROR(m->train_step(x, Tensor::from_vector<float>(std::vector<float>(24, 1.f), {3, 8}), *opt),
                      "class indices");
}

}  // namespace
}  // namespace strata::testing
