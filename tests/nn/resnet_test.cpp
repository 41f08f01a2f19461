// ResNet and LeNet: torchvision's parameter counts, names and shapes; output shapes
// on the null backend (any size, nothing computed) and the reference backend.
#include <gtest/gtest.h>

#include <cmath>

#include "strata/nn/layers/blocks.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

nn::ResNetConfig resnet(int depth, int64_t classes = 1000) {
  nn::ResNetConfig c;
  c.depth = depth;
  c.num_classes = classes;
  return c;
}

const Tensor* entry(const nn::StateDict& sd, const std::string& name) { return nn::find_entry(sd, name); }

TEST(NnResNet, ResNet50MatchesTorchvision) {
  auto m = nn::make_resnet(resnet(50), DispatchMode::virtual_call, "null");
  EXPECT_EQ(m->num_parameters(), 25557032);
  std::printf("ResNet-50 parameters: %s\n%s\n", nn::group_thousands(m->num_parameters()).c_str(),
              m->describe().c_str());
  EXPECT_NE(m->describe().find("25,557,032 parameters"), std::string::npos);
  EXPECT_NE(m->describe().find("kaiming_normal_fan_out"), std::string::npos);

  const nn::StateDict sd = m->state_dict();
  EXPECT_EQ(sd.size(), 320u);  // len(torchvision.models.resnet50().state_dict())
  const std::vector<std::string> head{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
                                      "bn1.num_batches_tracked", "layer1.0.conv1.weight", "layer1.0.bn1.weight"};
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(sd[i].first, head[i]);
  EXPECT_EQ(sd[sd.size() - 2].first, "fc.weight");
  EXPECT_EQ(sd.back().first, "fc.bias");
  // torchvision's names and shapes, v1.5 stride placement.
  const std::pair<const char*, Shape> shapes[] = {
      {"conv1.weight", {64, 3, 7, 7}},
      {"layer1.0.conv1.weight", {64, 64, 1, 1}},
      {"layer1.0.conv3.weight", {256, 64, 1, 1}},
      {"layer1.0.downsample.0.weight", {256, 64, 1, 1}},
      {"layer1.0.downsample.1.running_mean", {256}},
      {"layer1.0.downsample.1.num_batches_tracked", {}},
      {"layer2.0.conv1.weight", {128, 256, 1, 1}},
      {"layer2.0.conv2.weight", {128, 128, 3, 3}},
      {"layer3.5.bn3.running_var", {1024}},
      {"layer4.2.conv3.weight", {2048, 512, 1, 1}},
      {"fc.weight", {1000, 2048}},
      {"fc.bias", {1000}},
  };
  for (const auto& [name, shape] : shapes) {
    const Tensor* t = entry(sd, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->sizes(), shape) << name;
  }
  EXPECT_EQ(entry(sd, "layer1.1.downsample.0.weight"), nullptr);
  EXPECT_EQ(entry(sd, "conv1.bias"), nullptr) << "convs have no bias";
  // The stride sits on the 3x3 conv of the first bottleneck of layers 2-4 (v1.5).
  for (auto& [name, mod] : m->module().named_modules()) {
    if (name == "layer2.0") {
      auto* blk = dynamic_cast<nn::ResidualBlockBase*>(mod);
      ASSERT_NE(blk, nullptr);
      auto convs = blk->branch_convs();
      auto* c1 = dynamic_cast<nn::Conv2d<ops::VirtualDispatch>*>(convs[0]);
      auto* c2 = dynamic_cast<nn::Conv2d<ops::VirtualDispatch>*>(convs[1]);
      ASSERT_TRUE(c1 && c2);
      EXPECT_EQ(c1->conv_params().stride_h, 1);
      EXPECT_EQ(c2->conv_params().stride_h, 2);
    }
  }
}

TEST(NnResNet, ResNet18And34ParameterCounts) {
  EXPECT_EQ(nn::make_resnet(resnet(18), DispatchMode::virtual_call, "null")->num_parameters(), 11689512);
  EXPECT_EQ(nn::make_resnet(resnet(34), DispatchMode::virtual_call, "null")->num_parameters(), 21797672);
  auto r18 = nn::make_resnet(resnet(18), DispatchMode::virtual_call, "null");
  EXPECT_EQ(r18->state_dict().size(), 122u);
  EXPECT_NE(entry(r18->state_dict(), "layer2.0.downsample.1.weight"), nullptr);
  EXPECT_EQ(entry(r18->state_dict(), "layer1.0.downsample.0.weight"), nullptr);
}

TEST(NnResNet, OutputShapesOnNullBackendInEveryMode) {
  for (auto mode : kAllModes) {
    auto m = nn::make_resnet(resnet(50), mode, "null");
    m->eval();  // batch 1 in training would leave BN one value per channel at layer4 (as PyTorch, an error)
    for (int64_t side : {224, 64, 32}) {
      const Tensor logits = m->forward(Tensor::empty({1, 3, side, side}));
      EXPECT_EQ(logits.sizes(), (Shape{1, 1000})) << side;
    }
    m->train();
    EXPECT_EQ(m->forward(Tensor::empty({2, 3, 224, 224})).sizes(), (Shape{2, 1000}));
  }
  for (int depth : {18, 34}) {
    auto m = nn::make_resnet(resnet(depth, 10), DispatchMode::static_call, "null");
    m->eval();
    EXPECT_EQ(m->forward(Tensor::empty({1, 3, 224, 224})).sizes(), (Shape{1, 10}));
  }
}

TEST(NnResNet, ForwardOnReferenceBackend) {
  auto m = nn::make_resnet(resnet(50, 10), DispatchMode::direct, "reference");
  m->eval();
  const Tensor logits = m->predict(random_tensor({1, 3, 32, 32}, DType::f32, 1));
  ASSERT_EQ(logits.sizes(), (Shape{1, 10}));
  for (float v : logits.to_vector<float>()) EXPECT_TRUE(std::isfinite(v));

  nn::ResNetConfig mnist = resnet(18, 10);
  mnist.in_channels = 1;
  mnist.small_input = true;
  mnist.base_channels = 8;
  auto s = nn::make_resnet(mnist, DispatchMode::virtual_call, "reference");
  EXPECT_EQ(nn::find_entry(s->state_dict(), "conv1.weight")->sizes(), (Shape{8, 1, 3, 3}));
  EXPECT_EQ(nn::find_entry(s->state_dict(), "maxpool.weight"), nullptr);
  EXPECT_EQ(s->forward(random_tensor({2, 1, 28, 28}, DType::f32, 2)).sizes(), (Shape{2, 10}));
}

TEST(NnResNet, ConfigErrors) {
  EXPECT_STRATA_ERROR(nn::make_resnet(resnet(20), DispatchMode::virtual_call, "null"), "depth", "20");
  nn::ResNetConfig c = resnet(18, 10);
  c.base_channels = 8;
  auto m = nn::make_resnet(c, DispatchMode::virtual_call, "null");
  EXPECT_STRATA_ERROR(m->forward(Tensor::empty({1, 1, 32, 32})), "ResNet", "[N, 3, H, W]");
}

TEST(NnLeNet, SeedVariantsShapesAndCounts) {
  nn::LeNetConfig tf;  // 32/64 channels 'same', 7*7*64 -> 1024 -> 10
  auto a = nn::make_lenet(tf, DispatchMode::virtual_call, "null");
  EXPECT_EQ(a->num_parameters(), (32 * 25 + 32) + (64 * 32 * 25 + 64) + (3136 * 1024 + 1024) + (1024 * 10 + 10));
  EXPECT_EQ(a->forward(Tensor::empty({1, 1, 28, 28})).sizes(), (Shape{1, 10}));
  nn::LeNetConfig keras;
  keras.variant = nn::LeNetVariant::keras;  // 5/12 channels 'valid', 4*4*12 -> 128 -> 10
  auto b = nn::make_lenet(keras, DispatchMode::direct, "null");
  EXPECT_EQ(b->num_parameters(), (5 * 25 + 5) + (12 * 5 * 25 + 12) + (192 * 128 + 128) + (128 * 10 + 10));
  EXPECT_EQ(b->forward(Tensor::empty({4, 1, 28, 28})).sizes(), (Shape{4, 10}));
  EXPECT_NE(b->describe().find("Keras"), std::string::npos);
  EXPECT_NE(b->describe().find("pytorch_default"), std::string::npos);
  EXPECT_STRATA_ERROR(b->forward(Tensor::empty({4, 1, 32, 32})), "LeNet", "[N, 1, 28, 28]");
}

}  // namespace
}  // namespace strata::testing
