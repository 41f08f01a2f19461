// The cuda emitter's text (codegen/cuda/), without a GPU: a prediction recorded by hand (the
// calls and library choices the cuda backend reports, on host buffers laid out as an arena and
// weights) is written out, checked for the calls and choices it must carry, and the project is
// compiled and linked with the CUDA toolkit and cuDNN where this machine has them. Recording
// on the GPU and running what comes out is tools/gpu/codegen_cuda.sh's.
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

// A small network over every kind of call the emitter writes out: a convolution with its bias
// and ReLU in the cuDNN graph, max pooling, a legacy convolution with the residual and ReLU in
// strata's epilogue kernel, cuDNN's ReLU, an add, global average pooling, a linear layer (the
// bias broadcast by strata's copy kernel, then cuBLAS), strata's ReLU and a device copy.
struct HandRecorded {
  alignas(64) std::byte arena[8192] = {};
  alignas(64) std::byte consts[4096] = {};
  alignas(64) std::byte input_buffer[512] = {};
  alignas(64) float input[128] = {};
  codegen::RecordedStep step;
  std::map<const void*, std::string> names;

  float* c(int64_t off) { return reinterpret_cast<float*>(consts + off); }
  std::byte* a(int64_t off) { return arena + off; }

  codegen::RecordedCall& add(OpId op, codegen::RecordedArgs args, std::string layer, std::vector<LibraryCall> library) {
    codegen::RecordedCall call;
    call.op = op;
    call.args = std::move(args);
    call.layer = std::move(layer);
    call.library = std::move(library);
    step.calls.push_back(std::move(call));
    return step.calls.back();
  }

  HandRecorded() {
    for (int i = 0; i < 1024; ++i) reinterpret_cast<float*>(consts)[i] = static_cast<float>(i % 7) - 3.f;
    names[c(0)] = "conv1.weight";
    names[c(64)] = "conv1.bias";
    names[c(128)] = "conv2.weight (folded)";
    names[c(768)] = "conv2.bias (folded)";
    names[c(832)] = "fc.weight";
    names[c(896)] = "fc.bias";
    names[c(928)] = "fc2.weight";
    names[c(1024)] = "fc2.bias";
    step.model = "a hand-recorded test network";
    step.arena.base = arena;
    step.arena.bytes = sizeof arena;
    step.cudnn_version = 91900;
    const TensorView x = view(input, Shape{2, 1, 8, 8}), xin = view(input_buffer, Shape{2, 1, 8, 8});
    step.input = x;
    step.input_buffer = xin;
    LibraryCall h2d = lib(Kind::memcpy);
    h2d.m = 512;
    add(OpId::copy, ops::CopyArgs{x, xin}, "input", {h2d});

    ops::Conv2dFwdArgs c1;
    c1.x = xin;
    c1.w = view(c(0), Shape{4, 1, 3, 3});
    c1.b = view(c(64), Shape{4});
    c1.y = view(a(0), Shape{2, 4, 8, 8});
    c1.p.pad_h = c1.p.pad_w = 1;
    c1.relu = true;
    LibraryCall g = lib(Kind::conv_graph);
    g.engine = 7;
    g.knobs = {{3, 1}, {14, 2}};
    g.fused = true;
    g.workspace = 256;
    add(OpId::conv2d_fwd, c1, "conv1", {g});

    ops::MaxPool2dFwdArgs mp;
    mp.x = view(a(0), Shape{2, 4, 8, 8});
    mp.y = view(a(2048), Shape{2, 4, 4, 4});
    LibraryCall pool = lib(Kind::pooling);
    pool.mode = 0;
    add(OpId::max_pool2d_fwd, mp, "pool1", {pool});

    ops::Conv2dFwdArgs c2;
    c2.x = view(a(2048), Shape{2, 4, 4, 4});
    c2.w = view(c(128), Shape{4, 4, 3, 3});
    c2.b = view(c(768), Shape{4});
    c2.y = view(a(2560), Shape{2, 4, 4, 4});
    c2.p.pad_h = c2.p.pad_w = 1;
    c2.z = view(a(2048), Shape{2, 4, 4, 4});
    c2.relu = true;
    LibraryCall legacy = lib(Kind::conv_legacy);
    legacy.algo = 1;
    legacy.math = 2;
    legacy.workspace = 1024;
    add(OpId::conv2d_fwd, c2, "conv2", {legacy, lib(Kind::conv_epilogue)});

    add(OpId::relu_fwd, ops::ReluFwdArgs{view(a(2560), Shape{2, 4, 4, 4}), view(a(3072), Shape{2, 4, 4, 4})}, "",
        {lib(Kind::activation)});
    add(OpId::add,
        ops::AddArgs{view(a(3072), Shape{2, 4, 4, 4}), view(a(2048), Shape{2, 4, 4, 4}),
                     view(a(3584), Shape{2, 4, 4, 4})},
        "", {lib(Kind::own_kernel)});
    LibraryCall gap = lib(Kind::gap_kernel);
    add(OpId::global_avg_pool_fwd,
        ops::GlobalAvgPoolFwdArgs{view(a(3584), Shape{2, 4, 4, 4}), view(a(4096), Shape{2, 4})}, "", {gap});

    ops::LinearFwdArgs fc{view(a(4096), Shape{2, 4}), view(c(832), Shape{3, 4}), view(c(896), Shape{3}),
                          view(a(4160), Shape{2, 3})};
    LibraryCall gemm = lib(Kind::gemm);
    gemm.mode = 68;  // CUBLAS_COMPUTE_32F
    gemm.op_a = 1;
    gemm.op_b = 0;
    gemm.m = 3, gemm.n = 2, gemm.k = 4, gemm.lda = 4, gemm.ldb = 4, gemm.ldc = 3;
    gemm.beta = 1.f;
    gemm.a = c(832), gemm.b = a(4096), gemm.c = a(4160);
    add(OpId::linear_fwd, fc, "fc", {lib(Kind::convert), gemm});

    add(OpId::relu_fwd, ops::ReluFwdArgs{view(a(4160), Shape{2, 3}), view(a(4224), Shape{2, 3})}, "",
        {lib(Kind::own_kernel)});
    // Two rows: strata's few-rows kernel, one element a load (K = 3 is no whole 16 bytes).
    LibraryCall gemv = lib(Kind::gemv);
    gemv.mode = 1;
    add(OpId::linear_fwd,
        ops::LinearFwdArgs{view(a(4224), Shape{2, 3}), view(c(928), Shape{5, 3}), view(c(1024), Shape{5}),
                           view(a(4352), Shape{2, 5})},
        "fc2", {gemv});
    ops::SpaceToDepthArgs s2d{xin, view(a(5120), Shape{2, 4, 4, 4}), {}};
    s2d.p.channels = 1, s2d.p.out_h = 4, s2d.p.out_w = 4;
    add(OpId::space_to_depth_fwd, s2d, "", {lib(Kind::own_kernel)});
    LibraryCall d2d = lib(Kind::memcpy);
    d2d.m = 24;
    add(OpId::copy, ops::CopyArgs{view(a(4224), Shape{2, 3}), view(a(4288), Shape{2, 3})}, "", {d2d});
    step.output = view(a(4288), Shape{2, 3});
  }

  std::vector<codegen::GeneratedFile> emit() {
    codegen::BufferMap buffers(step, names);
    return codegen::cuda::emit_project(step, buffers);
  }
};


TEST(CodegenCudaText, WritesEveryCallWithTheBackendsChoices) {
  HandRecorded r;
  const auto files = r.emit();
  const std::string cpp = file(files, "model.cpp"), cu = file(files, "kernels.cu");
  // The engine strata chose, by global index and knob choices, and the fused epilogue's operands.
  EXPECT_NE(cpp.find("c1_conv1 = conv_graph(cudnn, \"conv1\""), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("nullptr, &bias, true, {1, 1}, {1, 1}, {1, 1}, 7, {{3, 1}, {14, 2}});"), std::string::npos);
  EXPECT_NE(cpp.find("run_conv(cudnn, c1_conv1, workspace, in + 0, w + 0, a + 0, w + 192, nullptr);"),
            std::string::npos);
  // The legacy convolution with its algorithm and math type, then strata's epilogue kernel.
  EXPECT_NE(cpp.find("static_cast<cudnnConvolutionFwdAlgo_t>(1), workspace, 1024"), std::string::npos);
  EXPECT_NE(cpp.find("static_cast<cudnnMathType_t>(2)"), std::string::npos);
  EXPECT_NE(cpp.find("kernels::conv_epilogue(stream, f32(a + 2560), f32(w + 832), f32(a + 2048), 128, 4, 16, true);"),
            std::string::npos);
  EXPECT_NE(cpp.find("cudnnPoolingForward(cudnn, c2_pool1.pool"), std::string::npos);
  EXPECT_NE(cpp.find("cudnnActivationForward"), std::string::npos);
  EXPECT_NE(cpp.find("kernels::add(stream, f32(a + 3072), f32(a + 2048), f32(a + 3584), 128);"), std::string::npos);
  EXPECT_NE(cpp.find("kernels::global_avg_pool(stream, f32(a + 3584), {2, 4, 4, 4}, {64, 16, 4, 1}, f32(a + 4096), "
                     "{4, 1});"),
            std::string::npos);
  // The bias broadcast over the rows (stride 0), then cuBLAS with beta 1, as the backend called it.
  EXPECT_NE(cpp.find("src[] = {0, 1}, dst[] = {3, 1};"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, 3, 2, 4, &kOne,"), std::string::npos);
  EXPECT_NE(cpp.find("&kOne, a + 4160, CUDA_R_32F, 3, static_cast<cublasComputeType_t>(68)"), std::string::npos);
  EXPECT_NE(cpp.find("kernels::relu(stream, f32(a + 4160), f32(a + 4224), 6);"), std::string::npos);
  EXPECT_NE(cpp.find("kernels::gemv(stream, 1, f32(a + 4224), f32(w + "), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("f32(a + 4352),\n               2, 5, 3, 3, 3, 1, 5, 1);"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("cudaMemcpyAsync(a + 4288, a + 4224, 24, cudaMemcpyDeviceToDevice, stream)"), std::string::npos);
  EXPECT_NE(cpp.find("kernels::space_to_depth(stream, f32(in + 0), {2, 1, 8, 8}, {64, 64, 8, 1}, f32(a + 5120), "
                     "{2, 4, 4, 4}, {64, 16, 4, 1}, 2, 0, 0);"),
            std::string::npos);
  // The input in, the output out, the calls captured once at load.
  EXPECT_NE(cpp.find("cudaMemcpyAsync(in + 0, input, 512, cudaMemcpyHostToDevice"), std::string::npos);
  EXPECT_NE(cpp.find("cudaMemcpyAsync(output, a + 4288, 24, cudaMemcpyDeviceToHost"), std::string::npos);
  EXPECT_NE(cpp.find("cudaStreamBeginCapture"), std::string::npos);
  // strata's kernels are in kernels.cu as strata's source, not a copy kept here.
  for (const char* k : {"dense_binary_kernel", "conv_epilogue_dense_kernel", "gap_fwd_kernel", "struct ConvertFn",
                        "elementwise_kernel", "struct Strided", "__device__ __forceinline__ T store(",
                        "space_to_depth_kernel", "gemv_kernel"})
    EXPECT_NE(cu.find(k), std::string::npos) << k;
  // The weights file: header, then each constant at its offset.
  const std::string bin = file(files, "weights.bin");
  // In the order the calls first read them, each at a multiple of 64 bytes.
  ASSERT_EQ(bin.size(), 24u + 1024u + 128u);  // fc2's weight and bias last, 64 bytes each
  EXPECT_EQ(std::memcmp(bin.data() + 24 + 256, r.c(128), 576), 0);  // conv2.weight (folded)
  EXPECT_EQ(std::memcmp(bin.data() + 24 + 960, r.c(832), 48), 0);   // fc.weight
  EXPECT_NE(cpp.find("w + 960, CUDA_R_32F, 4, a + 4096, CUDA_R_32F, 4"), std::string::npos);
}

// Where strata took global average pooling's input for channels-last (its channels 1 apart: NCHW
// planes of 1x1 are too), the program launches strata's channels-last kernel, and only then.
TEST(CodegenCudaText, GlobalAveragePoolingInTheLayoutStrataSaw) {
  HandRecorded r;
  EXPECT_EQ(file(r.emit(), "kernels.cu").find("gap_fwd_nhwc_kernel"), std::string::npos);
  for (codegen::RecordedCall& c : r.step.calls)
    if (c.op == OpId::global_avg_pool_fwd) c.library[0].mode = 1;
  const auto files = r.emit();
  const std::string cpp = file(files, "model.cpp"), cu = file(files, "kernels.cu");
  EXPECT_NE(cpp.find("kernels::global_avg_pool_nhwc(stream, f32(a + 3584), {2, 4, 4, 4}, {64, 16, 4, 1}, "
                     "f32(a + 4096), {4, 1});"),
            std::string::npos)
      << cpp;
  EXPECT_NE(cu.find("gap_fwd_nhwc_kernel<float><<<"), std::string::npos) << cu;
  EXPECT_EQ(cu.find("gap_fwd_kernel<float><<<"), std::string::npos);
}

TEST(CodegenCudaText, NamesWhatItDoesNotWriteOut) {
  {
    HandRecorded r;
    r.step.calls[2].library.insert(r.step.calls[2].library.begin(), lib(Kind::staged));
    EXPECT_STRATA_ERROR(r.emit(), "max_pool2d_fwd (pool1)", "temporary copy");
  }
  {
    HandRecorded r;  // a Tensor-level copy inside the step, which no op reported
    r.step.calls[3].library.push_back(lib(Kind::outside_copy));
    EXPECT_STRATA_ERROR(r.emit(), "a copy outside any op", "conv2d_fwd (conv2)");
  }
  {
    HandRecorded r;
    r.step.calls[4].op = OpId::batch_norm_fwd;
    r.step.calls[4].args = ops::BatchNormFwdArgs{};
    EXPECT_STRATA_ERROR(r.emit(), "op batch_norm_fwd", "is not supported by the cuda emitter");
  }
  {
    HandRecorded r;  // a graph convolution whose bias and ReLU ran nowhere
    r.step.calls[1].library[0].fused = false;
    EXPECT_STRATA_ERROR(r.emit(), "conv2d_fwd (conv1)", "neither inside the convolution's graph");
  }
  {
    HandRecorded r;  // cuDNN was told another alignment than the program's place would give
    auto& c1 = std::get<ops::Conv2dFwdArgs>(r.step.calls[1].args);
    c1.b.data = r.c(68);
    r.names[r.c(68)] = "conv1.bias";
    EXPECT_STRATA_ERROR(r.emit(), "conv2d_fwd (conv1) bias was 4-byte aligned in strata and would be 16-byte");
  }
  {
    HandRecorded r;  // a training step without labels: the loss's are i64 (codegen_cuda_train_test.cpp)
    r.step.training = true;
    EXPECT_STRATA_ERROR(r.emit(), "the training step takes f32 images and f32 labels", "contiguous i64 labels only");
  }
}

// Compiles and links the project with the CUDA toolkit and cuDNN (no GPU needed): the generated
// host code against cuDNN's and cuBLAS's headers, and strata's kernels with nvcc.
TEST(CodegenCudaText, TheProjectBuilds) {
#ifndef STRATA_TEST_CUDA_BUILD
  GTEST_SKIP() << "no CUDA compiler or cuDNN found when strata was configured";
#else
  HandRecorded r;
  // With the channels-last average pooling launcher: the ResNet training step's project builds the other.
  for (codegen::RecordedCall& c : r.step.calls)
    if (c.op == OpId::global_avg_pool_fwd) c.library[0].mode = 1;
  testing::expect_project_builds(r.emit(), "strata_codegen_cuda", "model_run");
#endif
}

}  // namespace
}  // namespace strata
