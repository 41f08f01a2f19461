// The cuda emitter's training step (codegen/cuda/train_*.cpp), without a GPU: a LeNet-like step
// recorded by hand (every kind of call strata's cuda backend reports for LeNet-5's training step,
// with the library choices and sum geometry it reports) is written out, checked for the calls it
// must carry and for its refusals, and the project is compiled with the CUDA toolkit and cuDNN
// where this machine has them. Recording on the GPU and running what comes out, against strata's
// losses and state, is tools/gpu/codegen_cuda_train.sh's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "strata/codegen/buffer_map.h"
#include "strata/codegen/cuda/emitter.h"
#include "cuda_project_util.h"
#include "hand_record.h"
#include "support/expect_error.h"

namespace strata {
namespace {

using namespace testing;

// conv (bias in the cuDNN graph) -> ReLU -> max pool -> dropout -> linear (2 rows: strata's few-rows
// kernel) -> softmax cross-entropy, its backward and SGD with momentum: a batch of 2 images 1x8x8.
struct HandTrainStep {
  alignas(64) std::byte arena[16384] = {};
  alignas(64) std::byte state[4096] = {};
  alignas(64) std::byte input_buffer[512] = {};
  alignas(64) float input[128] = {};
  alignas(64) int64_t labels[2] = {1, 2};
  codegen::RecordedStep step;
  std::map<const void*, std::string> names;

  float* s(int64_t off) { return reinterpret_cast<float*>(state + off); }
  std::byte* a(int64_t off) { return arena + off; }

  void add(OpId op, codegen::RecordedArgs args, std::vector<LibraryCall> library) {
    codegen::RecordedCall call;
    call.op = op;
    call.args = std::move(args);
    call.layer = op == OpId::sgd_step ? "sgd" : "net";
    call.library = std::move(library);
    step.calls.push_back(std::move(call));
  }

  HandTrainStep() {
    const std::pair<int64_t, const char*> named[] = {
        {0, "conv.weight"},           {256, "conv.bias"},           {512, "fc.weight"},
        {1280, "fc.bias"},            {1536, "conv.weight (momentum)"}, {1792, "conv.bias (momentum)"},
        {2048, "fc.weight (momentum)"}, {2816, "fc.bias (momentum)"}, {3072, "labels (the step's copy)"},
        {3136, "loss"},               {3200, "loss (logsumexp per row)"}, {3264, "loss (gradient seed)"}};
    for (const auto& [off, name] : named) names[state + off] = name;
    step.model = "a hand-recorded training step";
    step.training = true;
    step.arena.base = arena;
    step.arena.bytes = sizeof arena;
    step.cudnn_version = 91900;
    const TensorView x = view(input, Shape{2, 1, 8, 8}), xin = view(input_buffer, Shape{2, 1, 8, 8});
    const TensorView lab = view(state + 3072, Shape{2}, DType::i64);
    step.input = x;
    step.input_buffer = xin;
    step.labels = lab;
    step.output = view(s(3136), Shape{});
    LibraryCall h2d = lib(Kind::memcpy);
    h2d.m = 512;
    add(OpId::copy, ops::CopyArgs{x, xin}, {h2d});
    h2d.m = 16;
    add(OpId::copy, ops::CopyArgs{view(labels, Shape{2}, DType::i64), lab}, {h2d});

    const TensorView w = view(s(0), Shape{4, 1, 3, 3}), b = view(s(256), Shape{4});
    const TensorView conv_y = view(a(0), Shape{2, 4, 8, 8}), relu_y = view(a(2048), Shape{2, 4, 8, 8});
    const TensorView pool_y = view(a(4096), Shape{2, 4, 4, 4}), drop_y = view(a(4608), Shape{2, 64});
    const TensorView mask = view(a(5120), Shape{2, 64}, DType::u8), logits = view(a(5376), Shape{2, 3});
    const TensorView fw = view(s(512), Shape{3, 64}), fb = view(s(1280), Shape{3});
    ops::Conv2dParams cp;
    cp.pad_h = cp.pad_w = 1;
    LibraryCall g = lib(Kind::conv_graph);
    g.engine = 7, g.knobs = {{3, 1}}, g.fused = true, g.workspace = 256;
    ops::Conv2dFwdArgs conv{xin, w, b, conv_y, cp};
    add(OpId::conv2d_fwd, conv, {g});
    add(OpId::relu_fwd, ops::ReluFwdArgs{conv_y, relu_y}, {lib(Kind::own_kernel)});
    ops::Pool2dParams pp;
    pp.kernel_h = pp.kernel_w = pp.stride_h = pp.stride_w = 2;
    add(OpId::max_pool2d_fwd, ops::MaxPool2dFwdArgs{relu_y, pool_y, pp}, {lib(Kind::pooling)});
    ops::DropoutFwdArgs drop{view(a(4096), Shape{2, 64}), drop_y, mask, 0.4, 5, 256};
    add(OpId::dropout_fwd, drop, {lib(Kind::own_kernel)});
    add(OpId::linear_fwd, ops::LinearFwdArgs{drop_y, fw, fb, logits}, {lib(Kind::gemv, 4)});
    const TensorView loss = view(s(3136), Shape{}), lse = view(s(3200), Shape{2}), dloss = view(s(3264), Shape{});
    add(OpId::softmax_xent_fwd, ops::SoftmaxXentFwdArgs{logits, lab, loss, lse}, {lib(Kind::own_kernel, 128)});
    add(OpId::fill, ops::FillArgs{dloss, 1.0}, {lib(Kind::own_kernel)});
    const TensorView dlogits = view(a(5440), Shape{2, 3});
    add(OpId::softmax_xent_bwd, ops::SoftmaxXentBwdArgs{logits, lse, lab, dloss, dlogits}, {lib(Kind::own_kernel)});
    const TensorView ddrop = view(a(5504), Shape{2, 64}), dfw = view(a(6016), Shape{3, 64}),
                     dfb = view(a(6784), Shape{3});
    add(OpId::linear_bwd_data, ops::LinearBwdDataArgs{dlogits, fw, ddrop},
        {gemm(0, 0, 64, 2, 3, 64, 3, 64, fw.data, dlogits.data, ddrop.data)});
    LibraryCall cols = lib(Kind::column_sums, 0);
    cols.m = 1, cols.k = 2;
    add(OpId::linear_bwd_weight, ops::LinearBwdWeightArgs{drop_y, dlogits, dfw, dfb},
        {gemm(0, 1, 64, 3, 2, 64, 3, 64, drop_y.data, dlogits.data, dfw.data), cols});
    const TensorView dpool = view(a(6848), Shape{2, 4, 4, 4});
    add(OpId::dropout_bwd, ops::DropoutBwdArgs{ddrop, mask, view(a(6848), Shape{2, 64}), 0.4},
        {lib(Kind::own_kernel)});
    const TensorView drelu = view(a(7360), Shape{2, 4, 8, 8}), dconv = view(a(9408), Shape{2, 4, 8, 8});
    add(OpId::max_pool2d_bwd, ops::MaxPool2dBwdArgs{relu_y, pool_y, dpool, drelu, pp}, {lib(Kind::pooling_bwd)});
    add(OpId::relu_bwd, ops::ReluBwdArgs{relu_y, drelu, dconv}, {lib(Kind::activation_bwd)});
    const TensorView dw = view(a(11456), Shape{4, 1, 3, 3}), db = view(a(11648), Shape{4});
    LibraryCall chan = lib(Kind::channel_sums, 0);
    chan.m = 2, chan.k = 64;
    add(OpId::conv2d_bwd_bias, ops::Conv2dBwdBiasArgs{dconv, db}, {chan});
    LibraryCall gw = lib(Kind::conv_graph);
    gw.engine = 3, gw.workspace = 512;
    add(OpId::conv2d_bwd_weight, ops::Conv2dBwdWeightArgs{xin, dconv, dw, cp}, {gw});
    LibraryCall legacy = lib(Kind::conv_legacy);
    legacy.algo = 1, legacy.math = 2, legacy.workspace = 1024;
    add(OpId::conv2d_bwd_data, ops::Conv2dBwdDataArgs{dconv, w, view(a(11712), Shape{2, 1, 8, 8}), cp}, {legacy});
    ops::SgdOptions o;
    o.lr = 0.05, o.momentum = 0.9;
    const std::pair<TensorView, std::pair<TensorView, int64_t>> params[] = {
        {w, {dw, 1536}}, {b, {db, 1792}}, {fw, {dfw, 2048}}, {fb, {dfb, 2816}}};
    for (const auto& [p, gm] : params) {
      TensorView buf = p;
      buf.data = state + gm.second;
      add(OpId::sgd_step, ops::SgdStepArgs{p, gm.first, buf, o}, {lib(Kind::own_kernel)});
    }
  }

  std::vector<codegen::GeneratedFile> emit() {
    codegen::BufferMap buffers(step, names);
    return codegen::cuda::emit_project(step, buffers);
  }
};


TEST(CodegenCudaTrain, WritesEveryCallWithTheBackendsChoices) {
  HandTrainStep r;
  const auto files = r.emit();
  const std::string cpp = file(files, "model.cpp"), cu = file(files, "kernels.cu"), h = file(files, "model.h");
  EXPECT_TRUE(has(h, "float train_step(const float* input, const int64_t* labels);")) << h;
  EXPECT_TRUE(has(h, "inline constexpr int64_t kClasses = 3;"));
  // The batch in, the loss out; the step captured once at load, after a run whose state is put back.
  EXPECT_TRUE(has(cpp, "cudaMemcpyAsync(in + 0, input, 512, cudaMemcpyHostToDevice")) << cpp;
  EXPECT_TRUE(has(cpp, "cudaMemcpyAsync(w + "));
  EXPECT_TRUE(has(cpp, "CHECK(cudaMemcpyAsync(&loss, w + "));
  EXPECT_TRUE(has(cpp, "cudaStreamBeginCapture"));
  EXPECT_TRUE(has(cpp, "cudaMemcpyAsync(weights.p, saved.p, kStateBytes"));
  // Each backward call with the choice strata's backend reported.
  EXPECT_TRUE(has(cpp, ", 3, {}, 2);")) << cpp;  // the backward filter graph, engine 3
  EXPECT_TRUE(has(cpp, "cudnnConvolutionBackwardData(cudnn, &kOne,"));
  EXPECT_TRUE(has(cpp, "static_cast<cudnnConvolutionBwdDataAlgo_t>(1), workspace, 1024"));
  EXPECT_TRUE(has(cpp, "cudnnPoolingBackward(cudnn,"));
  EXPECT_TRUE(has(cpp, "cudnnActivationBackward(cudnn,"));
  EXPECT_TRUE(has(cpp, "cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_T, 64, 3, 2, &kOne,"));
  EXPECT_TRUE(has(cpp, "kernels::column_sums(stream, f32(a + 5440), 2, 3, 3, false, 1, 2, "));
  EXPECT_TRUE(has(cpp, "kernels::channel_sums(stream, f32(a + 9408), 4, 64, 2, sizes, strides, false, 2, 64,"));
  EXPECT_TRUE(has(cpp, "const int64_t sizes[] = {2, 64}, strides[] = {256, 1};"));
  EXPECT_TRUE(has(cpp, "kernels::softmax_xent(stream, f32(a + 5376), 2, 3, 3, 1,"));
  EXPECT_TRUE(has(cpp, ", 128,\n      reinterpret_cast<double*>(scratch + "));
  EXPECT_TRUE(has(cpp, "kernels::fill(stream, f32(w + "));
  EXPECT_TRUE(has(cpp, "kernels::dropout(stream, f32(a + 4096), f32(a + 4608), reinterpret_cast<uint8_t*>(a + 5120), "
                       "128,\n      reinterpret_cast<int64_t*>(w + kCountersAt + 0), 0.40000000000000002, "));
  // The state in the order the calls first read it: the labels' copy and the loss come first.
  // The four parameters' SGD steps in one call of strata's multi-tensor launches, in their order.
  EXPECT_TRUE(has(cpp, "kernels::sgd_list(stream, {\n"));
  EXPECT_TRUE(has(cpp, "      {f32(w + 128), f32(a + 11456), f32(w + 1344), 36},  // sgd\n"));
  EXPECT_FALSE(has(cpp, "kernels::sgd("));
  EXPECT_TRUE(has(cpp, "constexpr int64_t kCountersAt = 2432;"));
  EXPECT_TRUE(has(cpp, "0.050000000000000003, 0.90000000000000002, 0, false);"));
  // strata's training kernels are in kernels.cu as strata's source.
  for (const char* k : {"softmax_xent_fwd_kernel", "softmax_xent_bwd_kernel", "channel_reduce_outer_kernel",
                        "column_partial_kernel", "struct DropoutFn", "dropout_keep", "sgd_update", "xent_label_valid",
                        "multi_tensor_kernel", "struct SgdTensor", "list_tensor",
                        "dense_binary_kernel"})
    EXPECT_TRUE(has(cu, k)) << k;
  // Only the kernels this step runs, and machine code only (no PTX) for the architectures asked for.
  for (const char* k : {"bn_epilogue_kernel", "space_to_depth_kernel", "gap_fwd_kernel", "conv_epilogue_dense_kernel",
                        "depth_to_space_kernel", "struct GapBwdFn"})
    EXPECT_FALSE(has(cu, k)) << k;
  EXPECT_FALSE(has(file(files, "kernels.h"), "void space_to_depth("));
  EXPECT_TRUE(has(file(files, "CMakeLists.txt"), "set(arch ${arch}-real)"));
  // The state: every named tensor, then dropout's {seed, offset} after the recorded step.
  const std::string bin = file(files, "weights.bin");
  ASSERT_GE(bin.size(), 24u + 16u);
  uint64_t counter[2];
  std::memcpy(counter, bin.data() + bin.size() - 16, 16);
  EXPECT_EQ(counter[0], 5u);
  EXPECT_EQ(counter[1], 256u + 128u);
  EXPECT_EQ(bin.size(), 24u + 2432u + 16u);
  EXPECT_EQ(std::memcmp(bin.data() + 24 + 128, r.s(0), 144), 0);  // conv.weight
}

TEST(CodegenCudaTrain, NamesWhatItDoesNotWriteOut) {
  const auto at = [](HandTrainStep& r, OpId op) -> codegen::RecordedCall& {
    for (auto& c : r.step.calls)
      if (c.op == op) return c;
    throw std::runtime_error("no such call");
  };
  {
    HandTrainStep r;  // a schedule read from memory
    std::get<ops::SgdStepArgs>(at(r, OpId::sgd_step).args).hyper = view(r.s(0), Shape{2}, DType::f64);
    EXPECT_STRATA_ERROR(r.emit(), "sgd_step (sgd)", "fixed learning rate only");
  }
  {
    HandTrainStep r;  // ReLU's backward through something else than cuDNN or strata's kernel
    at(r, OpId::relu_bwd).library[0] = lib(Kind::pooling);
    EXPECT_STRATA_ERROR(r.emit(), "relu_bwd (net)", "otherwise than by strata's kernel");
  }
  {
    HandTrainStep r;  // an op no training step of LeNet-5 or ResNet runs
    auto& c = at(r, OpId::relu_bwd);
    c.op = OpId::avg_pool2d_bwd;
    c.args = ops::MaxPool2dBwdArgs{};
    EXPECT_STRATA_ERROR(r.emit(), "op avg_pool2d_bwd", "the backward of those LeNet-5 and ResNet run");
  }
  {
    HandTrainStep r;  // a dropout whose seed graph mode keeps on the device
    std::get<ops::DropoutFwdArgs>(at(r, OpId::dropout_fwd).args).rng = view(r.s(0), Shape{2}, DType::i64);
    EXPECT_STRATA_ERROR(r.emit(), "dropout_fwd (net)", "reads its seed from device memory");
  }
  {
    HandTrainStep r;  // a backward convolution staged through a temporary
    at(r, OpId::conv2d_bwd_weight).library.insert(at(r, OpId::conv2d_bwd_weight).library.begin(), lib(Kind::staged));
    EXPECT_STRATA_ERROR(r.emit(), "conv2d_bwd_weight (net)", "temporary copy");
  }
}

TEST(CodegenCudaTrain, OneSgdListPerRunOfLikeOptions) {
  HandTrainStep r;
  std::vector<codegen::RecordedCall*> steps;
  for (auto& c : r.step.calls)
    if (c.op == OpId::sgd_step) steps.push_back(&c);
  ASSERT_EQ(steps.size(), 4u);
  std::get<ops::SgdStepArgs>(steps[2]->args).o.lr = 0.01;  // the third parameter's own learning rate
  const std::string cpp = file(r.emit(), "model.cpp");
  size_t lists = 0;
  for (size_t at = cpp.find("kernels::sgd_list("); at != std::string::npos; at = cpp.find("kernels::sgd_list(", at + 1))
    ++lists;
  EXPECT_EQ(lists, 3u);  // the first two, the third, the fourth
  EXPECT_TRUE(has(cpp, "    }, 0.01, 0.90000000000000002, 0, false);"));
}

// Compiles and links model_train with the CUDA toolkit and cuDNN (no GPU needed).
TEST(CodegenCudaTrain, TheProjectBuilds) {
#ifndef STRATA_TEST_CUDA_BUILD
  GTEST_SKIP() << "no CUDA compiler or cuDNN found when strata was configured";
#else
  HandTrainStep r;
  testing::expect_project_builds(r.emit(), "strata_codegen_cuda_train", "model_train");
#endif
}

}  // namespace
}  // namespace strata
