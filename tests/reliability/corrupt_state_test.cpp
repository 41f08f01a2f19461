// Old or corrupt checkpoints whose file format is valid but whose values are not
// ("old checkpoints ... may not silently give wrong answers"). Found while
// building the safetensors fuzz target; its corpus keeps the inputs
// (fuzz/corpus/safetensors/regression_*), these tests keep the contracts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <vector>

#include "strata/core/file.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/layers/container.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/optim.h"
#include "reliability_util.h"

namespace strata::testing {
namespace {

using P = ops::VirtualDispatch;

TEST(FloatToInteger, ConversionsSaturateInsteadOfOverflowing) {
  // static_cast of NaN or an out-of-range float to an integer is undefined behaviour;
  // copies (and load_state_dict, which copies) saturate, NaN -> 0.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor src =
      Tensor::from_vector(std::vector<float>{std::nanf(""), 1e30f, -1e30f, inf, -inf, 42.9f, -7.5f}, {7});
  Tensor i64 = Tensor::empty({7}, DType::i64);
  copy_into(src, i64);
  EXPECT_EQ(i64.to_vector<int64_t>(), (std::vector<int64_t>{0, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 42, -7}));
  Tensor u8 = Tensor::empty({7}, DType::u8);
  copy_into(src, u8);
  EXPECT_EQ(u8.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 0, 255, 0, 42, 0}));
  Tensor i32 = Tensor::empty({7}, DType::i32);
  copy_into(src, i32);
  EXPECT_EQ(i32.to_vector<int32_t>(), (std::vector<int32_t>{0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 42, -7}));
}

struct Fixture {
  nn::Sequential model;
  std::unique_ptr<nn::Optimizer> adam;
  Fixture() {
    const P p(backends::registry().get("reference"));
    model.add(std::make_unique<nn::Linear<P>>(p, 3, 2));
    nn::OptimizerConfig c;
    c.kind = nn::OptimizerKind::adam;
    c.lr = 0.01;
    adam = std::make_unique<nn::Optimizer>(c, nn::param_groups(model, 0.0, false),
                                           nn::make_step_kernels(ops::DispatchMode::virtual_call, "reference"));
    for (auto& [n, t] : model.named_parameters()) {
      copy_into(random_tensor(t.sizes(), t.dtype(), 3), t);
      t.set_grad(random_tensor(t.sizes(), t.dtype(), 4));
    }
    adam->step();
  }
};

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("strata_reliability_" + std::to_string(::getpid()) + "_" + name);
}

TEST(CorruptCheckpoint, AdamStepCountsThatAreNotCountsAreRefused) {
  for (const double bad : {std::nan(""), -5.0, 0.0, 9.3e18, 2.5}) {
    SCOPED_TRACE(bad);
    Fixture f;
    nn::StateDict sd = f.adam->state_dict();
    for (auto& [n, t] : sd)
      if (n.size() > 5 && n.substr(n.size() - 5) == ".step") t = Tensor::from_vector(std::vector<double>{bad}, Shape{});
    Fixture g;
    const nn::StateDict before = g.adam->state_dict();
    EXPECT_STRATA_ERROR(g.adam->load_state_dict(sd), "optimizer load_state_dict", ".step", "not a step count");
    // Nothing was written: the optimizer still steps from its own state.
    const nn::StateDict after = g.adam->state_dict();
    ASSERT_EQ(before.size(), after.size());
    for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(bitwise_equal(before[i].second, after[i].second));
    EXPECT_NO_THROW(g.adam->step());
  }
  // A float step count, as PyTorch writes it, is fine.
  Fixture f, g;
  nn::StateDict sd = f.adam->state_dict();
  for (auto& [n, t] : sd)
    if (n.size() > 5 && n.substr(n.size() - 5) == ".step") t = Tensor::from_vector(std::vector<float>{1.0f}, Shape{});
  EXPECT_NO_THROW(g.adam->load_state_dict(sd));
}

TEST(CorruptCheckpoint, BadMetadataIsRefusedBeforeAnyTensorIsWritten) {
  Fixture f;
  const auto path = temp_file("meta.safetensors");
  for (const char* lr : {"nan", "-0.1", "inf", "0.1x", ""}) {
    SCOPED_TRACE(lr);
    nn::save_checkpoint(path.string(), f.model, f.adam.get(), 7);
    auto c = nn::safetensors::load(path.string());
    c.metadata["strata.optimizer_lr"] = lr;
    nn::safetensors::save(path.string(), c.tensors, c.metadata);
    Fixture g;
    const Tensor w_before = g.model.named_parameters().front().second.clone();
    EXPECT_STRATA_ERROR(nn::load_checkpoint(path.string(), g.model, g.adam.get()), "strata.optimizer_lr",
                        "not a learning rate");
    EXPECT_TRUE(bitwise_equal(g.model.named_parameters().front().second, w_before)) << "weights were written";
    EXPECT_EQ(g.adam->lr(), 0.01);
  }
  std::filesystem::remove(path);
}

TEST(NonFinite, CountsNanAndInfinityInEveryFloatDtypeByTheirBits) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> values = {1.0, nan, -inf, inf, 0.0, -nan, 65504.0, -2.5};
  for (const DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = Tensor::empty({8}, dt);
    copy_into(Tensor::from_vector(values, Shape{8}), t);
    EXPECT_EQ(nn::non_finite_tensors({{"w", t}}), std::vector<std::string>{"'w' holds 2 NaN and 2 infinite of its 8 values"});
    copy_into(Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, Shape{8}), t);
    EXPECT_TRUE(nn::non_finite_tensors({{"w", t}}).empty());
  }
  // Integer tensors (a step count, BatchNorm's num_batches_tracked) cannot hold either.
  EXPECT_TRUE(nn::non_finite_tensors({{"n", Tensor::from_vector(std::vector<int64_t>{-1, 7}, Shape{2})}}).empty());
}

void poison(nn::Module& m, const std::string& name, double value) {
  for (auto& [n, t] : m.named_parameters())
    if (n == name) {
      std::vector<float> v = t.to_vector<float>();
      v[1] = static_cast<float>(value);
      copy_into(Tensor::from_vector(v, t.sizes()), t);
    }
}

TEST(NonFinite, SavingNonFiniteParametersIsRefusedAndThePreviousCheckpointKept) {
  Fixture f;
  const auto path = temp_file("nonfinite_save.safetensors");
  nn::save_checkpoint(path.string(), f.model, f.adam.get(), 7);
  const std::vector<uint8_t> before = read_regular_file(path);
  poison(f.model, "0.weight", std::nan(""));
  EXPECT_STRATA_ERROR(nn::save_checkpoint(path.string(), f.model, f.adam.get(), 8), "refusing to save",
                      path.c_str(), "at step 8", "'0.weight' holds 1 NaN and 0 infinite of its 6 values",
                      "previous file", "is kept");
  EXPECT_EQ(read_regular_file(path), before);
  poison(f.model, "0.weight", 1.0);
  // Optimizer state too: a non-finite moment poisons the next step.
  for (auto& [n, t] : f.adam->state_dict())
    if (n == "0.bias.exp_avg") copy_into(Tensor::from_vector(std::vector<float>{1.0f, INFINITY}, t.sizes()), t);
  EXPECT_STRATA_ERROR(nn::save_checkpoint(path.string(), f.model, f.adam.get(), 9),
                      "'optimizer.0.bias.exp_avg' holds 0 NaN and 1 infinite");
  EXPECT_EQ(read_regular_file(path), before);
  std::filesystem::remove(path);
}

TEST(NonFinite, LoadingNonFiniteTensorsIsRefusedNamingThemUnlessAllowed) {
  Fixture f;
  const auto path = temp_file("nonfinite_load.safetensors");
  nn::save_checkpoint(path.string(), f.model, f.adam.get(), 7);
  auto c = nn::safetensors::load(path.string());
  for (auto& [n, t] : c.tensors)
    if (n == "0.bias") t = Tensor::from_vector(std::vector<float>{std::nanf(""), -INFINITY}, Shape{2});
  nn::safetensors::save(path.string(), c.tensors, c.metadata);  // as a diverged run of old wrote it
  Fixture g;
  const Tensor w_before = g.model.named_parameters().back().second.clone();
  EXPECT_STRATA_ERROR(nn::load_checkpoint(path.string(), g.model, g.adam.get()), path.c_str(),
                      "'0.bias' holds 1 NaN and 1 infinite of its 2 values", "diverged run", "refused");
  EXPECT_TRUE(bitwise_equal(g.model.named_parameters().back().second, w_before)) << "weights were written";
  const nn::CheckpointInfo info = nn::load_checkpoint(path.string(), g.model, g.adam.get(), {.allow_non_finite = true});
  ASSERT_EQ(info.warnings.size(), 1u);
  EXPECT_TRUE(message_contains(info.warnings[0], {path.c_str(), "'0.bias' holds 1 NaN"}));
  EXPECT_TRUE(std::isnan(g.model.named_parameters().back().second.to_vector<float>()[0]));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace strata::testing
