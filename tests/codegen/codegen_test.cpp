// The code generator's library in-process: what it refuses, by name, before it writes
// anything, and the memory plan it writes out. The generated programs themselves are
// built and compared bit for bit with strata by the codegen.* ctest cases (CMakeLists.txt).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "strata/codegen/emitter.h"
#include "strata/codegen/generate.h"
#include "strata/nn/model.h"
#include "support/expect_error.h"
#include "support/random.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

class CodegenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("strata_codegen_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::unique_ptr<nn::Model> lenet(ops::DispatchMode mode = ops::DispatchMode::direct) {
    nn::LeNetConfig c;
    c.init.seed = 2;
    auto m = nn::make_lenet(c, mode, "onednn");
    m->eval();
    return m;
  }
  static Tensor input(const Shape& s) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 13) / 13.f - 0.5f;
    return Tensor::from_vector(v, s);
  }
  static codegen::GenerateOptions to(const fs::path& dir, std::string backend = "onednn") {
    codegen::GenerateOptions o;
    o.out_dir = dir.string();
    o.backend = std::move(backend);
    return o;
  }
  fs::path dir_;
};

TEST_F(CodegenTest, WritesTheProjectWithDirectModesArena) {
  auto m = lenet();
  const codegen::GenerateResult r = codegen::generate(*m, input(Shape{2, 1, 28, 28}), to(dir_));
  for (const char* f : {"model.cpp", "model.h", "weights.bin", "weights.h", "weights.cpp", "main.cpp", "CMakeLists.txt"})
    EXPECT_TRUE(fs::exists(dir_ / f)) << f;
  // The arena is the one the planner laid out for this prediction, not one of the generator's.
  EXPECT_EQ(r.arena_bytes, m->step_memory().arena_bytes);
  EXPECT_GT(r.arena_bytes, 0);
  EXPECT_EQ(r.calls, 10);  // copy, 2 x (conv, relu, pool), fc1, relu, fc2
  std::ifstream in(dir_ / "model.cpp");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("in one arena of " + std::to_string(r.arena_bytes) + " bytes"), std::string::npos);
  EXPECT_NE(text.find("// fc1: linear_fwd"), std::string::npos);
  EXPECT_EQ(text.find("strata/"), std::string::npos) << "the generated code includes a strata header";
}

TEST_F(CodegenTest, RefusesAFolderThatIsNotEmpty) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "notes.txt") << "mine";
  auto m = lenet();
  EXPECT_STRATA_ERROR(codegen::generate(*m, input(Shape{1, 1, 28, 28}), to(dir_)),
                      "output folder", "exists and is not empty", "--force");
  EXPECT_FALSE(fs::exists(dir_ / "model.cpp"));
  codegen::GenerateOptions o = to(dir_);
  o.overwrite = true;
  codegen::generate(*m, input(Shape{1, 1, 28, 28}), o);
  // The plan of a shape is read as it is made: the same model at the same shape again is refused.
  EXPECT_STRATA_ERROR(codegen::generate(*m, input(Shape{1, 1, 28, 28}), o), "predicted for f32[1,1,28,28]",
                      "before", "has not yet predicted at this shape");
  EXPECT_TRUE(fs::exists(dir_ / "model.cpp"));
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
}

TEST_F(CodegenTest, NamesAnOpItDoesNotSupport) {
  // Without batch-norm folding the evaluation runs batch_norm_fwd, which the emitter writes out in
  // a training step only.
  nn::ResNetConfig c;
  c.depth = 18;
  c.small_input = true;
  c.base_channels = 8;
  c.fold_batch_norm = false;
  auto m = nn::make_resnet(c, ops::DispatchMode::direct, "onednn");
  m->eval();
  EXPECT_STRATA_ERROR(codegen::generate(*m, input(Shape{1, 3, 16, 16}), to(dir_)),
                      "op batch_norm_fwd (bn1)", "is not supported by the onednn emitter");
  EXPECT_FALSE(fs::exists(dir_)) << "a refused model must leave no folder behind";
}

TEST_F(CodegenTest, RefusesOtherModesTrainingAndInputs) {
  auto virt = lenet(ops::DispatchMode::virtual_call);
  EXPECT_STRATA_ERROR(codegen::generate(*virt, input(Shape{1, 1, 28, 28}), to(dir_)),
                      "direct mode's plans on the onednn backend");
  auto training = lenet();
  training->train();
  EXPECT_STRATA_ERROR(codegen::generate(*training, input(Shape{1, 1, 28, 28}), to(dir_)),
                      "training mode");
  auto m = lenet();
  EXPECT_STRATA_ERROR(codegen::generate(*m, input(Shape{1, 28, 28}), to(dir_)),
                      "contiguous [N, C, H, W] f32", "f32[1,28,28]");
  EXPECT_STRATA_ERROR(codegen::generate(*m, input(Shape{1, 1, 28, 28}), to(dir_, "eigen")),
                      "no emitter for backend 'eigen'", "onednn, cuda");
  // The cuda emitter records on the cuda backend only (or, built without it, says so).
  EXPECT_STRATA_ERROR(codegen::generate(*m, input(Shape{1, 1, 28, 28}), to(dir_, "cuda")), "the cuda backend");
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(CodegenTest, WritesATrainingStepOut) {
  auto m = lenet();
  auto opt = m->make_optimizer(nn::OptimizerConfig{});
  const Tensor x = input(Shape{2, 1, 28, 28});
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{1, 7}, Shape{2});
  EXPECT_STRATA_ERROR(codegen::generate_train_step(*m, x, labels, *opt, to(dir_)), "evaluation mode", "train()");
  m->train();
  EXPECT_STRATA_ERROR(codegen::generate_train_step(*m, x, Tensor::from_vector(std::vector<int64_t>{1}, Shape{1}),
                                                   *opt, to(dir_)),
                      "labels must be a contiguous i64 [2]");
  EXPECT_FALSE(fs::exists(dir_)) << "a refused step must leave no folder behind";
  const codegen::GenerateResult r = codegen::generate_train_step(*m, x, labels, *opt, to(dir_));
  EXPECT_EQ(r.calls, 38);
  std::ifstream in(dir_ / "model.cpp");
  const std::string cpp((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* part : {"float Model::train_step(", "softmax_xent_rows(", "sgd_momentum_update(", "dropout_keep(",
                           "convolution_backward_weights", "pooling_backward", "channel_sums("})
    EXPECT_NE(cpp.find(part), std::string::npos) << part;
  EXPECT_TRUE(fs::exists(dir_ / "weights.bin"));
}

}  // namespace
}  // namespace strata
