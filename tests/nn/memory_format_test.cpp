// A channels-last model keeps its convolution weights, their compute-dtype copies and
// their gradients in the activations' layout (Module::to_memory_format), so that no
// convolution stages a weight or a weight gradient into another layout (on the cuda
// backend, tests/cuda/resnet50_step_test.cpp counts the staging copies). The layout is
// invisible to everything else: a channels-last model trains as a contiguous one, and
// its checkpoints load into either.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "nn_test_util.h"
#include "strata/nn/safetensors.h"

namespace strata::testing {
namespace {

nn::ModelOptions channels_last(std::optional<DType> compute = std::nullopt) {
  nn::ModelOptions o;
  o.memory_format = MemoryFormat::channels_last;
  o.compute_dtype = compute;
  return o;
}

// 3x3 and 7x7 weights: the ones whose channels-last strides differ from contiguous ones.
bool spatial(const Tensor& t) { return t.dim() == 4 && t.size(2) * t.size(3) > 1; }

class NnMemoryFormat : public ::testing::TestWithParam<ops::DispatchMode> {};

TEST_P(NnMemoryFormat, WeightsAndTheirGradientsFollowTheActivationsLayout) {
  for (std::optional<DType> compute : {std::optional<DType>(), std::optional<DType>(DType::f32)}) {
    SCOPED_TRACE(compute ? "f64 masters, f32 compute" : "f64");
    auto m = nn::make_resnet(tiny_resnet(18, DType::f64, 4), GetParam(), "reference", channels_last(compute));
    int weights = 0;
    for (const auto& [name, p] : m->module().named_parameters()) {
      if (!spatial(p)) continue;
      ++weights;
      EXPECT_TRUE(p.is_channels_last() && !p.is_contiguous()) << name;
    }
    EXPECT_EQ(weights, 17);  // the stem and the 16 3x3 convolutions of the blocks
    auto opt = m->make_optimizer({});
    m->train_step(random_tensor({2, 3, 8, 8}, DType::f32, 41), random_labels(2, 10, 42), *opt);
    for (const auto& [name, p] : m->module().named_parameters()) {
      if (!spatial(p)) continue;
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_TRUE(p.grad().is_channels_last() && !p.grad().is_contiguous()) << name << ": " << p.grad().str();
    }
  }
}

// Batch-norm folding's copies of the weights (kept beside the parameters) follow them.
TEST_P(NnMemoryFormat, FoldedWeightsFollowTheWeightsLayout) {
  nn::ResNetConfig c = tiny_resnet(18, DType::f64, 4);
  c.fold_batch_norm = true;
  auto m = nn::make_resnet(c, GetParam(), "reference", channels_last());
  m->eval();  // folds: the copies are made then
  int folded = 0;
  nn::with_policy(GetParam(), "reference", [&](const auto& p) {
    using P = std::decay_t<decltype(p)>;
    for (auto& [name, mod] : m->module().named_modules())
      if (const auto* conv = dynamic_cast<const nn::Conv2d<P>*>(mod); conv && conv->folded_weight().defined() &&
                                                                       spatial(conv->weight())) {
        ++folded;
        EXPECT_EQ(conv->folded_weight().strides(), conv->weight().strides()) << name;
      }
  });
  EXPECT_GT(folded, 0);
}

// Without a layout of its own, a model takes its backend's preferred one: NCHW on every CPU
// backend (tests/cuda/graph_mode_test.cpp checks cuda's choices), for every compute dtype; a layout
// asked for is kept.
TEST_P(NnMemoryFormat, WithoutALayoutTheBackendsPreferenceIsTaken) {
  for (const std::string& backend : backends::registry().names()) {
    if (backends::registry().get(backend).device_type() != DeviceType::cpu) continue;
    SCOPED_TRACE(backend);
    EXPECT_EQ(backends::registry().get(backend).preferred_memory_format(DType::f32), MemoryFormat::contiguous);
    auto chosen = nn::make_resnet(tiny_resnet(18, DType::f32, 4), GetParam(), backend, nn::ModelOptions{});
    const Tensor in = chosen->input_buffer(Shape{2, 3, 8, 8});
    EXPECT_TRUE(in.is_contiguous()) << in.str();
    for (const auto& [name, p] : chosen->module().named_parameters()) {
      if (spatial(p)) {
        EXPECT_TRUE(p.is_contiguous()) << name;
      }
    }
    auto asked = nn::make_resnet(tiny_resnet(18, DType::f32, 4), GetParam(), backend, channels_last());
    EXPECT_FALSE(asked->input_buffer(Shape{2, 3, 8, 8}).is_contiguous());
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, NnMemoryFormat, ::testing::ValuesIn(kAllModes),
                         [](const auto& info) { return std::string(ops::dispatch_mode_name(info.param)); });

// The same training in both layouts (f64 on the reference: equal to rounding), and a
// checkpoint of the channels-last model loads into the contiguous one exactly.
TEST(NnMemoryFormatTraining, ChannelsLastTrainsAsContiguousAndItsCheckpointsLoadAnywhere) {
  const Tensor x = random_tensor({3, 3, 8, 8}, DType::f32, 51);
  const Tensor y = random_labels(3, 10, 52);
  auto nchw = nn::make_resnet(tiny_resnet(18, DType::f64, 6), ops::DispatchMode::direct, "reference");
  auto nhwc = nn::make_resnet(tiny_resnet(18, DType::f64, 6), ops::DispatchMode::direct, "reference", channels_last());
  nn::OptimizerConfig oc;
  oc.lr = 0.05;
  oc.momentum = 0.9;
  auto opt_a = nchw->make_optimizer(oc), opt_b = nhwc->make_optimizer(oc);
  for (int s = 0; s < 3; ++s) {
    const double la = nchw->train_step(x, y, *opt_a).loss.item();
    const double lb = nhwc->train_step(x, y, *opt_b).loss.item();
    EXPECT_NEAR(la, lb, 1e-12 * std::abs(la)) << "step " << s;
  }
  const auto pa = nchw->state_dict(), pb = nhwc->state_dict();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(close(pb[i].second, pa[i].second, 1e-10)) << pa[i].first;

  const std::string path = ::testing::TempDir() + "strata_memory_format_test.safetensors";
  nn::safetensors::save(path, nhwc->state_dict());
  auto fresh = nn::make_resnet(tiny_resnet(18, DType::f64, 99), ops::DispatchMode::direct, "reference");
  fresh->load_state_dict(nn::safetensors::load(path).tensors);
  std::remove(path.c_str());
  const auto pf = fresh->state_dict();
  for (size_t i = 0; i < pb.size(); ++i) EXPECT_TRUE(bitwise_equal(pf[i].second, pb[i].second.contiguous())) << pb[i].first;
}

}  // namespace
}  // namespace strata::testing
