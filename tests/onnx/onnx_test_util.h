#pragma once
// Shared by the ONNX tests: models to export and what makes their batch norm non-trivial.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "strata/nn/init.h"
#include "strata/nn/layers/activation.h"
#include "strata/nn/layers/batch_norm.h"
#include "strata/nn/layers/container.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/layers/pool.h"
#include "strata/nn/model.h"
#include "strata/onnx/onnx.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/random.h"

namespace strata::testing {

inline const ops::DispatchMode kAllModes[] = {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call,
                                              ops::DispatchMode::direct};

// Batch norm's affine parameters and running statistics at random (gamma and var in
// [0.5, 1.5), beta and mean in [-0.2, 0.2)), so that eval-mode batch norm is not the
// identity and folding has work to do.
inline void randomize_batch_norm(nn::Module& m, uint64_t seed) {
  nn::StateDict sd;
  for (auto& [path, mod] : m.named_modules()) {
    if (mod->type_name() != "BatchNorm2d") continue;
    const std::string prefix = path.empty() ? "" : path + ".";
    const int64_t c = mod->param("weight").numel();
    sd.emplace_back(prefix + "weight", random_tensor({c}, DType::f32, ++seed, 0.5, 1.5));
    sd.emplace_back(prefix + "bias", random_tensor({c}, DType::f32, ++seed, -0.2, 0.2));
    sd.emplace_back(prefix + "running_mean", random_tensor({c}, DType::f32, ++seed, -0.2, 0.2));
    sd.emplace_back(prefix + "running_var", random_tensor({c}, DType::f32, ++seed, 0.5, 1.5));
  }
  m.load_state_dict(sd, false);
}

// A user's network of every exportable layer, for 3x16x16 inputs: conv (stride 2, bias),
// batch norm, relu, grouped dilated conv (no bias), batch norm, relu, avg pool (padded),
// max pool, dropout, flatten, linear, relu, linear.
template <class P>
std::unique_ptr<nn::Sequential> user_net(const P& p, uint64_t seed = 3) {
  auto s = std::make_unique<nn::Sequential>();
  nn::Conv2dOptions c1;
  c1.stride = 2;
  c1.padding = 1;
  s->add(std::make_unique<nn::Conv2d<P>>(p, 3, 8, 3, c1));
  s->add(std::make_unique<nn::BatchNorm2d<P>>(p, 8));
  s->add(std::make_unique<nn::ReLU<P>>(p));
  nn::Conv2dOptions c2;
  c2.padding = 2;
  c2.dilation = 2;
  c2.groups = 2;
  c2.bias = false;
  s->add(std::make_unique<nn::Conv2d<P>>(p, 8, 8, 3, c2));
  s->add(std::make_unique<nn::BatchNorm2d<P>>(p, 8));
  s->add(std::make_unique<nn::ReLU<P>>(p));
  s->add(std::make_unique<nn::AvgPool2d<P>>(p, 3, 2, 1));
  s->add(std::make_unique<nn::MaxPool2d<P>>(p, 2));
  s->add(std::make_unique<nn::Dropout<P>>(p, 0.3, 5));
  s->add(std::make_unique<nn::Flatten<P>>(p));
  s->add(std::make_unique<nn::Linear<P>>(p, 32, 16));
  s->add(std::make_unique<nn::ReLU<P>>(p));
  s->add(std::make_unique<nn::Linear<P>>(p, 16, 5));
  nn::initialize(*s, {nn::InitPolicy::pytorch_default, false, seed});
  randomize_batch_norm(*s, seed);
  return s;
}

inline nn::ResNetConfig small_resnet(int depth, bool small_input, int64_t base = 8) {
  nn::ResNetConfig c;
  c.depth = depth;
  c.num_classes = 10;
  c.small_input = small_input;
  c.base_channels = base;
  c.init.seed = 7;
  return c;
}

// Tests that write files: a fresh folder root_ named after the running test, removed after it.
class OnnxFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("strata_onnx_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::filesystem::path root_;
};

inline onnx::ExportOptions export_options(Shape item, bool fold = false) {
  onnx::ExportOptions o;
  o.input_sizes = item;
  o.fold_batch_norm = fold;
  return o;
}

}  // namespace strata::testing
