#pragma once
// Shared helpers of the nn tests.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "strata/nn/model.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/random.h"

namespace strata::testing {

// A fresh directory named after the running test, removed on destruction.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("strata_nn_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A ResNet of `depth` with 8 base channels for 10 classes (small_input: 3x3 stem, no
// max pool), cheap enough for whole training steps on the reference backend.
inline nn::ResNetConfig tiny_resnet(int depth, DType dt = DType::f32, uint64_t seed = 5) {
  nn::ResNetConfig c;
  c.depth = depth;
  c.num_classes = 10;
  c.small_input = true;
  c.base_channels = 8;
  c.init.seed = seed;
  c.dtype = dt;
  return c;
}

inline const ops::DispatchMode kAllModes[] = {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call,
                                              ops::DispatchMode::direct};

// Everything a training step produces, for bitwise comparisons across modes.
struct StepOutputs {
  Tensor loss, logits;
  nn::StateDict grads, state;  // parameter gradients; parameters and buffers after the step
};

inline StepOutputs snapshot(nn::Model& m, const nn::StepResult& r) {
  StepOutputs o;
  o.loss = r.loss.clone();
  o.logits = r.logits.clone();
  for (auto& [n, p] : m.module().named_parameters())
    o.grads.emplace_back(n, p.grad().defined() ? p.grad().clone() : Tensor());
  for (auto& [n, t] : m.state_dict()) o.state.emplace_back(n, t.clone());
  return o;
}

inline void expect_bitwise(const StepOutputs& a, const StepOutputs& b, const std::string& what) {
  EXPECT_TRUE(bitwise_equal(a.loss, b.loss)) << what << ": loss";
  EXPECT_TRUE(bitwise_equal(a.logits, b.logits)) << what << ": logits";
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_TRUE(a.grads[i].second.defined()) << what << ": no gradient for " << a.grads[i].first;
    ASSERT_TRUE(b.grads[i].second.defined()) << what << ": no gradient for " << b.grads[i].first;
    EXPECT_TRUE(bitwise_equal(a.grads[i].second, b.grads[i].second)) << what << ": grad of " << a.grads[i].first;
  }
  ASSERT_EQ(a.state.size(), b.state.size());
  for (size_t i = 0; i < a.state.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a.state[i].second, b.state[i].second)) << what << ": " << a.state[i].first;
}

}  // namespace strata::testing
