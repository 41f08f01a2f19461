// Batch-norm folding on the GPU (nn::ResNetConfig::fold_batch_norm): ResNet-50 in
// evaluation, folded against unfolded (every op separate), in every dispatch mode with
// graph mode's captured replays, f32 NCHW and bf16 channels-last (the benchmark's form),
// through the cuDNN-fused epilogue and through strata's epilogue kernel. Stated tolerance
// (relative error of the logits): f32 1e-4 (cuDNN's f32 convolutions sum in their own
// order, as in tests/cuda/conv_test.cpp); bf16 3e-2 (the folded weights are rounded to
// bf16 once, the unfolded model rounds after the convolution, the batch norm, the add).
// A folded step runs no batch norm, ReLU or add kernels.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "strata/autograd/grad_mode.h"
#include "strata/backends/api/registry.h"
#include "strata/nn/nn.h"
#include "strata/ops/trace.h"

namespace strata::testing {
namespace {

class CudaFold : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_skip_reason().empty()) GTEST_SKIP() << "no usable GPU: " << gpu_skip_reason();
  }
  void TearDown() override {
    if (gpu_skip_reason().empty()) backends::registry().impl<backends::CudaBackend>().set_cudnn_fused_epilogue(true);
  }
};

std::unique_ptr<nn::Model> resnet50(ops::DispatchMode mode, bool fold, const nn::ModelOptions& o,
                                    std::optional<bool> s2d_stem = std::nullopt) {
  nn::ResNetConfig c;
  c.space_to_depth_stem = s2d_stem;
  c.depth = 50;
  c.num_classes = 100;
  c.init.seed = 4;
  c.fold_batch_norm = fold;
  c.fuse_eval = fold;  // the reference model runs every op separately
  return nn::make_resnet(c, mode, "cuda", o);
}

// Non-trivial batch norms (weight, bias, running statistics), the same in both models.
void randomise_batch_norms(nn::Model& a, nn::Model& b) {
  nn::StateDict sd = a.state_dict();
  uint64_t seed = 700;
  for (auto& [name, t] : sd) {
    const std::string base = name.substr(0, name.rfind('.') + 1);
    if (nn::find_entry(sd, base + "running_mean") == nullptr || name.ends_with("num_batches_tracked")) continue;
    const bool centred = name.ends_with("running_mean") || name.ends_with(".bias");
    copy_into(random_tensor(t.sizes(), t.dtype(), ++seed, centred ? -0.3 : 0.5, centred ? 0.3 : 1.5), t);
  }
  b.load_state_dict(sd);
}

Tensor host_f32(const Tensor& t) {
  Tensor h = Tensor::empty(t.sizes(), DType::f32, Device::cpu());
  copy_into(t, h);
  return h;
}

void check(ops::DispatchMode mode, const nn::ModelOptions& o, double tol) {
  auto folded = resnet50(mode, true, o), plain = resnet50(mode, false, o);
  randomise_batch_norms(*folded, *plain);
  folded->eval();
  plain->eval();
  const Tensor x = random_tensor({4, 3, 64, 64}, DType::f32, 81);
  const Tensor want = host_f32(plain->predict(x));
  // Three calls: plan (direct), capture and replay (graph mode).
  for (int i = 0; i < 3; ++i) {
    ops::take_trace();
    ops::set_trace_enabled(true);
    const Tensor got = host_f32(folded->predict(x));
    ops::set_trace_enabled(false);
    EXPECT_TRUE(close(got, want, tol)) << "call " << i;
    for (const ops::TraceEvent& e : ops::take_trace()) {
      const std::string_view n = ops::op_name(e.op);
      EXPECT_TRUE(n != "batch_norm_fwd" && n != "relu_fwd" && n != "add") << n << " in a folded step";
    }
  }
}

TEST_F(CudaFold, ResNet50FoldedMatchesUnfoldedInEveryMode) {
  auto& cb = backends::registry().impl<backends::CudaBackend>();
  nn::ModelOptions bf16;
  bf16.compute_dtype = DType::bf16;
  bf16.memory_format = MemoryFormat::channels_last;
  for (bool in_cudnn : {true, false}) {
    cb.set_cudnn_fused_epilogue(in_cudnn);
    for (ops::DispatchMode mode : {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call,
                                   ops::DispatchMode::direct, ops::DispatchMode::graph}) {
      SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)) + (in_cudnn ? " cudnn epilogue" : " strata kernel"));
      const auto before = backends::cuda::conv_api_counts();
      check(mode, {}, 1e-4);
      const auto mid = backends::cuda::conv_api_counts();
      check(mode, bf16, kTolBf16);
      const auto after = backends::cuda::conv_api_counts();
      const size_t fused = after.fused - before.fused, kernels = after.epilogue_kernels - before.epilogue_kernels;
      EXPECT_GT(fused + kernels, 0u);
      // bf16 channels-last: every epilogue (downsampling biases and residuals too) inside
      // cuDNN's graph on sm_90 (conv_graph.cpp), none as a kernel of its own.
      if (in_cudnn && sm90_or_later()) {
        EXPECT_EQ(after.epilogue_kernels - mid.epilogue_kernels, 0u);
      }
      if (!in_cudnn) {
        EXPECT_EQ(fused, 0u);
      }
      if (in_cudnn)
        RecordProperty(std::string(ops::dispatch_mode_name(mode)) + "_cudnn_fused_of_all",
                       std::to_string(fused) + "/" + std::to_string(fused + kernels));
    }
  }
}

// The space-to-depth stem (on by default on the GPU) against the folded 7x7 stem, both
// folded, in the modes that plan and capture; the trace shows the rearrangement ran once.
TEST_F(CudaFold, SpaceToDepthStemMatchesTheStem) {
  nn::ModelOptions bf16;
  bf16.compute_dtype = DType::bf16;
  bf16.memory_format = MemoryFormat::channels_last;
  for (const auto& [o, tol] : {std::pair{nn::ModelOptions{}, 1e-4}, std::pair{bf16, kTolBf16}})
    for (ops::DispatchMode mode : {ops::DispatchMode::virtual_call, ops::DispatchMode::direct,
                                   ops::DispatchMode::graph}) {
      SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)) + (o.compute_dtype ? " bf16" : " f32"));
      auto blocks = resnet50(mode, true, o), stem = resnet50(mode, true, o, false);
      randomise_batch_norms(*blocks, *stem);
      blocks->eval();
      stem->eval();
      const Tensor x = random_tensor({3, 3, 67, 61}, DType::f32, 82);
      const Tensor want = host_f32(stem->predict(x));
      for (int i = 0; i < 3; ++i) {
        ops::take_trace();
        ops::set_trace_enabled(true);
        const Tensor got = host_f32(blocks->predict(x));
        ops::set_trace_enabled(false);
        EXPECT_TRUE(close(got, want, tol)) << "call " << i;
        int rearranged = 0;
        for (const ops::TraceEvent& e : ops::take_trace()) rearranged += e.op == ops::OpId::space_to_depth_fwd;
        if (mode != ops::DispatchMode::graph || i == 0) {
          EXPECT_EQ(rearranged, 1) << "call " << i;
        }
      }
    }
}

// Weights written during evaluation (copy_into, gradients off) between graph mode's captured
// predictions: the replay, which runs no forward(), replays the folded copies of the new
// weights (Module::refresh_derived), and so does the capture after a write; f32 and bf16
// channels-last (the bf16 folded copies follow too).
TEST_F(CudaFold, GraphModeReplaysWeightsWrittenInEvaluation) {
  nn::ModelOptions bf16;
  bf16.compute_dtype = DType::bf16;
  bf16.memory_format = MemoryFormat::channels_last;
  for (const auto& [o, tol] : {std::pair{nn::ModelOptions{}, 1e-4}, std::pair{bf16, kTolBf16}}) {
    SCOPED_TRACE(o.compute_dtype ? "bf16" : "f32");
    auto folded = resnet50(ops::DispatchMode::graph, true, o), plain = resnet50(ops::DispatchMode::direct, false, o);
    randomise_batch_norms(*folded, *plain);
    folded->eval();
    plain->eval();
    const Tensor x = random_tensor({2, 3, 64, 64}, DType::f32, 83);
    autograd::NoGradGuard no_grad;
    uint64_t seed = 900;
    for (int call = 0; call < 4; ++call) {  // plan, capture, replay, replay
      if (call == 1 || call == 3) {
        seed += 100;
        for (nn::Model* m : {folded.get(), plain.get()}) {
          uint64_t s = seed;
          for (auto& [name, t] : m->module().named_parameters())
            if (name.find("conv") != std::string::npos)
              copy_into(random_tensor(t.sizes(), DType::f32, s++, -0.05, 0.05), t);
        }
      }
      EXPECT_TRUE(close(host_f32(folded->predict(x)), host_f32(plain->predict(x)), tol)) << "call " << call;
    }
  }
}

}  // namespace
}  // namespace strata::testing
