// The cuda emitter's training step of a ResNet (codegen/cuda/batch_norm_text.cpp, train_text.cpp),
// without a GPU: a step recorded by hand through every kind of call strata's cuda backend reports
// for ResNet's training step on the GPU and LeNet-5's does not (the stem over pixel blocks and its
// weight gradient's rearrangement back, batch norm in training fused with its residual add, ReLU
// and mask, and unfused in the shortcut, their backward masked into the residual's gradient or
// into dx, global average pooling's backward, the gradients' add, SGD of batch norm's gamma and
// beta), written out, checked for the text it must carry and its refusals, and compiled.
#include <gtest/gtest.h>

#include <string>

#include "strata/codegen/buffer_map.h"
#include "strata/codegen/cuda/emitter.h"
#include "cuda_project_util.h"
#include "hand_record.h"
#include "support/expect_error.h"

namespace strata {
namespace {

using namespace testing;

// input [2, 3, 8, 8] -> the stem's space-to-depth (x and the weight) and convolution -> bn1 (ReLU,
// mask) -> conv2 (legacy) and the shortcut's 1x1 conv (graph) with its plain batch norm -> bn2
// (residual, ReLU, mask) -> global average pooling -> fc (two rows: the few-rows kernel) -> loss,
// and back, each parameter stepped by SGD with momentum.
struct HandResNetStep {
  alignas(64) std::byte arena[32768] = {};
  alignas(64) std::byte state[16384] = {};
  alignas(64) std::byte input_buffer[1536] = {};
  alignas(64) float input[384] = {};
  alignas(64) int64_t labels[2] = {1, 2};
  codegen::RecordedStep step;
  std::map<const void*, std::string> names;
  int64_t arena_used = 0, state_used = 0;
  std::vector<std::pair<TensorView, TensorView>> params;  // (parameter, gradient)

  TensorView in_arena(const Shape& sizes, DType dt = DType::f32) {
    const TensorView v = view(arena + arena_used, sizes, dt);
    arena_used += (sizes.numel() * static_cast<int64_t>(dtype_size(dt)) + 63) / 64 * 64;
    return v;
  }
  TensorView in_state(const Shape& sizes, const std::string& name, DType dt = DType::f32) {
    const TensorView v = view(state + state_used, sizes, dt);
    names[v.data] = name;
    state_used += (sizes.numel() * static_cast<int64_t>(dtype_size(dt)) + 63) / 64 * 64;
    return v;
  }
  TensorView param(const Shape& sizes, const std::string& name) {
    const TensorView p = in_state(sizes, name);
    params.push_back({p, in_arena(sizes)});
    return p;
  }
  TensorView grad(const TensorView& p) {
    for (const auto& [q, g] : params)
      if (q.data == p.data) return g;
    throw std::runtime_error("no such parameter");
  }

  void add(OpId op, codegen::RecordedArgs args, const std::string& layer, std::vector<LibraryCall> library) {
    codegen::RecordedCall call;
    call.op = op;
    call.args = std::move(args);
    call.layer = layer;
    call.library = std::move(library);
    step.calls.push_back(std::move(call));
  }

  // A training batch norm of x into y (fused: with z's residual, ReLU and a mask), on cuDNN's spatial mode.
  ops::BatchNormFwdArgs bn_fwd(const std::string& name, const TensorView& x, const TensorView& y,
                               const TensorView& z, bool relu, const TensorView& mask) {
    const int64_t c = x.sizes[1];
    ops::BatchNormFwdArgs a;
    a.x = x, a.y = y, a.z = z, a.relu = relu, a.relu_mask = mask;
    a.gamma = param(Shape{c}, name + ".weight");
    a.beta = param(Shape{c}, name + ".bias");
    a.running_mean = in_state(Shape{c}, name + ".running_mean");
    a.running_var = in_state(Shape{c}, name + ".running_var");
    a.save_mean = in_arena(Shape{c});
    a.save_invstd = in_arena(Shape{c});
    std::vector<LibraryCall> l{lib(Kind::batch_norm, 1)};
    if (z.defined || relu) l.push_back(lib(Kind::batch_norm_epilogue));
    add(OpId::batch_norm_fwd, a, name, l);
    return a;
  }
  void bn_bwd(const std::string& name, const ops::BatchNormFwdArgs& f, const TensorView& dy, const TensorView& dx,
              const TensorView& dz) {
    ops::BatchNormBwdArgs a;
    a.x = f.x, a.dy = dy, a.gamma = f.gamma, a.save_mean = f.save_mean, a.save_invstd = f.save_invstd, a.dx = dx;
    a.dgamma = grad(f.gamma), a.dbeta = grad(f.beta), a.relu_mask = f.relu_mask, a.dz = dz;
    std::vector<LibraryCall> l{lib(Kind::batch_norm_bwd, 1)};
    if (f.relu_mask.defined) l.insert(l.begin(), lib(Kind::batch_norm_mask));
    add(OpId::batch_norm_bwd, a, name, l);
  }

  HandResNetStep() {
    step.model = "a hand-recorded ResNet training step";
    step.training = true;
    step.arena.base = arena;
    step.arena.bytes = sizeof arena;
    step.cudnn_version = 91900;
    const TensorView x = view(input, Shape{2, 3, 8, 8}), xin = view(input_buffer, Shape{2, 3, 8, 8});
    const TensorView lab = in_state(Shape{2}, "labels (the step's copy)", DType::i64);
    const TensorView loss = in_state(Shape{}, "loss"), lse = in_state(Shape{2}, "loss (logsumexp per row)");
    const TensorView dloss = in_state(Shape{}, "loss (gradient seed)");
    step.input = x;
    step.input_buffer = xin;
    step.labels = lab;
    step.output = loss;
    LibraryCall h2d = lib(Kind::memcpy);
    h2d.m = 1536;
    add(OpId::copy, ops::CopyArgs{x, xin}, "input", {h2d});
    h2d.m = 16;
    add(OpId::copy, ops::CopyArgs{view(labels, Shape{2}, DType::i64), lab}, "input", {h2d});

    // The stem over 2x2 pixel blocks: x and the 4x4/2 weight to blocks, a 2x2/1 convolution.
    const TensorView w1 = param(Shape{4, 3, 4, 4}, "conv1.weight");
    const TensorView xs = in_arena(Shape{2, 12, 4, 4}), ws = in_arena(Shape{4, 12, 2, 2});
    ops::SpaceToDepthArgs sx{xin, xs, {}}, sw{w1, ws, {}};
    sx.p.channels = 12, sx.p.out_h = sx.p.out_w = 4;
    sw.p.channels = 12, sw.p.out_h = sw.p.out_w = 2;
    add(OpId::space_to_depth_fwd, sx, "conv1", {lib(Kind::own_kernel)});
    add(OpId::space_to_depth_fwd, sw, "conv1", {lib(Kind::own_kernel)});
    const TensorView y0 = in_arena(Shape{2, 4, 3, 3});
    ops::Conv2dParams p0;
    p0.pad_h = p0.pad_w = 0;
    LibraryCall g0 = lib(Kind::conv_graph);
    g0.engine = 5, g0.workspace = 128;
    add(OpId::conv2d_fwd, ops::Conv2dFwdArgs{xs, ws, {}, y0, p0}, "conv1", {g0});
    const TensorView y1 = in_arena(Shape{2, 4, 3, 3}), mask1 = in_arena(Shape{9}, DType::u8);
    const ops::BatchNormFwdArgs bn1 = bn_fwd("bn1", y0, y1, {}, true, mask1);

    // The block: conv2 (legacy), the shortcut's 1x1 conv (graph) and plain batch norm, bn2 fused.
    ops::Conv2dParams p3;
    p3.pad_h = p3.pad_w = 1;
    const TensorView w2 = param(Shape{4, 4, 3, 3}, "layer1.0.conv2.weight"), y2 = in_arena(Shape{2, 4, 3, 3});
    LibraryCall legacy = lib(Kind::conv_legacy);
    legacy.algo = 1, legacy.math = 2, legacy.workspace = 512;
    add(OpId::conv2d_fwd, ops::Conv2dFwdArgs{y1, w2, {}, y2, p3}, "layer1.0.conv2", {legacy});
    ops::Conv2dParams p1;
    p1.pad_h = p1.pad_w = 0;
    const TensorView wd = param(Shape{4, 4, 1, 1}, "layer1.0.downsample.0.weight"), yd = in_arena(Shape{2, 4, 3, 3});
    LibraryCall gd = lib(Kind::conv_graph);
    gd.engine = 9, gd.knobs = {{3, 2}};
    add(OpId::conv2d_fwd, ops::Conv2dFwdArgs{y1, wd, {}, yd, p1}, "layer1.0.downsample.0", {gd});
    const TensorView y3 = in_arena(Shape{2, 4, 3, 3});
    const ops::BatchNormFwdArgs bnd = bn_fwd("layer1.0.downsample.1", yd, y3, {}, false, {});
    const TensorView y4 = in_arena(Shape{2, 4, 3, 3}), mask2 = in_arena(Shape{9}, DType::u8);
    const ops::BatchNormFwdArgs bn2 = bn_fwd("layer1.0.bn2", y2, y4, y3, true, mask2);

    // Head, loss and the head's backward.
    const TensorView pooled = in_arena(Shape{2, 4});
    add(OpId::global_avg_pool_fwd, ops::GlobalAvgPoolFwdArgs{y4, pooled}, "avgpool", {lib(Kind::gap_kernel)});
    const TensorView fw = param(Shape{3, 4}, "fc.weight"), fb = param(Shape{3}, "fc.bias");
    const TensorView logits = in_arena(Shape{2, 3});
    add(OpId::linear_fwd, ops::LinearFwdArgs{pooled, fw, fb, logits}, "fc", {lib(Kind::gemv, 4)});
    add(OpId::softmax_xent_fwd, ops::SoftmaxXentFwdArgs{logits, lab, loss, lse}, "fc", {lib(Kind::own_kernel, 32)});
    add(OpId::fill, ops::FillArgs{dloss, 1.0}, "fc", {lib(Kind::own_kernel)});
    const TensorView dlogits = in_arena(Shape{2, 3});
    add(OpId::softmax_xent_bwd, ops::SoftmaxXentBwdArgs{logits, lse, lab, dloss, dlogits}, "fc",
        {lib(Kind::own_kernel)});
    const TensorView dpooled = in_arena(Shape{2, 4});
    add(OpId::linear_bwd_data, ops::LinearBwdDataArgs{dlogits, fw, dpooled}, "fc",
        {gemm(0, 0, 4, 2, 3, 4, 3, 4, fw.data, dlogits.data, dpooled.data)});
    LibraryCall cols = lib(Kind::column_sums, 0);
    cols.m = 1, cols.k = 2;
    add(OpId::linear_bwd_weight, ops::LinearBwdWeightArgs{pooled, dlogits, grad(fw), grad(fb)}, "fc",
        {gemm(0, 1, 4, 3, 2, 4, 3, 4, pooled.data, dlogits.data, grad(fw).data), cols});
    const TensorView dy4 = in_arena(Shape{2, 4, 3, 3});
    add(OpId::global_avg_pool_bwd, ops::GlobalAvgPoolBwdArgs{dpooled, dy4}, "avgpool", {lib(Kind::own_kernel)});

    // The block's backward: bn2 masked into the residual's gradient dz; the shortcut; conv2; their sum.
    const TensorView dz = in_arena(Shape{2, 4, 3, 3}), dy2 = in_arena(Shape{2, 4, 3, 3});
    bn_bwd("layer1.0.bn2", bn2, dy4, dy2, dz);
    const TensorView dyd = in_arena(Shape{2, 4, 3, 3});
    bn_bwd("layer1.0.downsample.1", bnd, dz, dyd, {});
    const TensorView dy1_short = in_arena(Shape{2, 4, 3, 3}), dy1_main = in_arena(Shape{2, 4, 3, 3});
    LibraryCall gdd = lib(Kind::conv_graph);
    gdd.engine = 2;
    add(OpId::conv2d_bwd_data, ops::Conv2dBwdDataArgs{dyd, wd, dy1_short, p1}, "layer1.0.downsample.0", {gdd});
    LibraryCall gdw = lib(Kind::conv_graph);
    gdw.engine = 4, gdw.workspace = 64;
    add(OpId::conv2d_bwd_weight, ops::Conv2dBwdWeightArgs{y1, dyd, grad(wd), p1}, "layer1.0.downsample.0", {gdw});
    LibraryCall ld = lib(Kind::conv_legacy);
    ld.algo = 0, ld.math = 1;
    add(OpId::conv2d_bwd_data, ops::Conv2dBwdDataArgs{dy2, w2, dy1_main, p3}, "layer1.0.conv2", {ld});
    add(OpId::conv2d_bwd_weight, ops::Conv2dBwdWeightArgs{y1, dy2, grad(w2), p3}, "layer1.0.conv2", {gdw});
    const TensorView dy1 = in_arena(Shape{2, 4, 3, 3});
    add(OpId::add, ops::AddArgs{dy1_short, dy1_main, dy1}, "layer1.0", {lib(Kind::own_kernel)});

    // bn1 masked into dx (no residual); the stem's weight gradient, back from its blocks.
    const TensorView dy0 = in_arena(Shape{2, 4, 3, 3});
    bn_bwd("bn1", bn1, dy1, dy0, {});
    const TensorView dws = in_arena(Shape{4, 12, 2, 2});
    add(OpId::conv2d_bwd_weight, ops::Conv2dBwdWeightArgs{xs, dy0, dws, p0}, "conv1", {gdw});
    add(OpId::space_to_depth_bwd, ops::SpaceToDepthBwdArgs{dws, grad(w1), sw.p}, "conv1", {lib(Kind::own_kernel)});

    ops::SgdOptions o;
    o.lr = 0.05, o.momentum = 0.9;
    for (const auto& [p, g] : params) {
      const TensorView buf = in_state(p.sizes, names[p.data] + " (momentum)");
      add(OpId::sgd_step, ops::SgdStepArgs{p, g, buf, o}, "sgd", {lib(Kind::own_kernel)});
    }
  }

  codegen::RecordedCall& at(OpId op, const std::string& layer) {
    for (auto& c : step.calls)
      if (c.op == op && c.layer == layer) return c;
    throw std::runtime_error("no such call");
  }

  std::vector<codegen::GeneratedFile> emit() {
    codegen::BufferMap buffers(step, names);
    return codegen::cuda::emit_project(step, buffers);
  }
};

TEST(CodegenCudaResNetTrain, WritesEveryCallWithTheBackendsChoices) {
  HandResNetStep r;
  const auto files = r.emit();
  const std::string cpp = file(files, "model.cpp"), cu = file(files, "kernels.cu"), h = file(files, "kernels.h");
  // cuDNN's training forward with the running statistics in the state, then strata's epilogue kernel.
  EXPECT_TRUE(has(cpp, "= batch_norm(legacy, {2, 4, 3, 3}, {36, 9, 3, 1}, {2, 4, 3, 3}, {36, 9, 3, 1}, "
                       "static_cast<cudnnBatchNormMode_t>(1));")) << cpp;
  EXPECT_TRUE(has(cpp, "CHECK(cudnnBatchNormalizationForwardTraining(cudnn, static_cast<cudnnBatchNormMode_t>(1), "
                       "&kOne, &kZero, "));
  EXPECT_TRUE(has(cpp, ", 0.10000000000000001,\n      w + "));
  EXPECT_TRUE(has(cpp, ", 1.0000000000000001e-05, a + "));
  EXPECT_TRUE(has(cpp, "kernels::batch_norm_epilogue(stream, f32(a + ")) << cpp;
  EXPECT_TRUE(has(cpp, "), nullptr, reinterpret_cast<uint8_t*>(a + ")) << cpp;  // bn1: ReLU and mask, no residual
  EXPECT_TRUE(has(cpp, ", 72, true);"));
  // The backward: masked into dz (bn2), into dx (bn1), none (the shortcut's), then cuDNN's.
  size_t masks = 0;
  for (size_t at = cpp.find("kernels::batch_norm_mask(stream, "); at != std::string::npos;
       at = cpp.find("kernels::batch_norm_mask(stream, ", at + 1))
    ++masks;
  EXPECT_EQ(masks, 2u);
  EXPECT_TRUE(has(cpp, "CHECK(cudnnBatchNormalizationBackward(cudnn, static_cast<cudnnBatchNormMode_t>(1), &kOne, "
                       "&kZero, &kOne, &kZero,\n"));
  EXPECT_TRUE(has(cpp, ", 1e-5, a + "));
  // Global average pooling's backward, the gradients' add, the stem's weight gradient back from blocks.
  EXPECT_TRUE(has(cpp, "kernels::global_avg_pool_bwd(stream, f32(a + ")) << cpp;
  EXPECT_TRUE(has(cpp, "), {4, 1}, f32(a + "));
  EXPECT_TRUE(has(cpp, "), {2, 4, 3, 3}, {36, 9, 3, 1});"));
  EXPECT_TRUE(has(cpp, "kernels::add(stream, f32(a + "));
  EXPECT_TRUE(has(cpp, "kernels::space_to_depth_bwd(stream, f32(a + ")) << cpp;
  EXPECT_TRUE(has(cpp, "{4, 12, 2, 2}, {48, 4, 2, 1}, f32(a + "));
  EXPECT_TRUE(has(cpp, "), {4, 3, 4, 4}, {48, 16, 4, 1}, 2, 0, 0);"));
  EXPECT_TRUE(has(cpp, "kernels::space_to_depth(stream, f32(w + "));  // the weight's blocks, from the state
  // SGD over batch norm's gamma and beta too.
  EXPECT_TRUE(has(cpp, "// layer1.0.bn2: batch_norm_fwd [2,4,3,3] -> [2,4,3,3] (cudnnBatchNormalization"));
  // Every parameter's step in one call of strata's multi-tensor launches: an entry per parameter.
  const size_t list = cpp.find("kernels::sgd_list(stream, {\n");
  ASSERT_NE(list, std::string::npos);
  EXPECT_EQ(cpp.find("kernels::sgd_list(", list + 1), std::string::npos);
  size_t entries = 0;
  for (size_t at = cpp.find("},  // sgd\n", list); at != std::string::npos; at = cpp.find("},  // sgd\n", at + 1))
    ++entries;
  EXPECT_EQ(entries, r.params.size());
  // The kernels of this step, strata's source, and none other.
  for (const char* k : {"bn_epilogue_kernel", "bn_mask_grad_kernel", "relu_mask_bit", "struct GapBwdFn",
                        "depth_to_space_kernel", "space_to_depth_kernel", "gap_fwd_kernel", "dense_binary_kernel",
                        "gemv_kernel", "sgd_update", "softmax_xent_fwd_kernel", "column_partial_kernel"})
    EXPECT_TRUE(has(cu, k)) << k;
  for (const char* k : {"conv_epilogue_dense_kernel", "struct DropoutFn", "struct ConvertFn", "channel_reduce_outer"})
    EXPECT_FALSE(has(cu, k)) << k;
  EXPECT_FALSE(has(h, "void dropout("));
  EXPECT_TRUE(has(h, "void batch_norm_mask("));
}

TEST(CodegenCudaResNetTrain, NamesWhatItDoesNotWriteOut) {
  {
    HandResNetStep r;  // strata's own batch norm kernels (channels-last, half precision, synchronised)
    r.at(OpId::batch_norm_fwd, "bn1").library = {lib(Kind::own_batch_norm)};
    EXPECT_STRATA_ERROR(r.emit(), "batch_norm_fwd (bn1)", "strata's own batch norm kernels");
  }
  {
    HandResNetStep r;  // a fused forward whose epilogue the backend did not report
    r.at(OpId::batch_norm_fwd, "layer1.0.bn2").library.pop_back();
    EXPECT_STRATA_ERROR(r.emit(), "batch_norm_fwd (layer1.0.bn2)", "otherwise than by cuDNN's batch norm and "
                        "strata's kernel");
  }
  {
    HandResNetStep r;  // evaluation mode inside a training step
    std::get<ops::BatchNormBwdArgs>(r.at(OpId::batch_norm_bwd, "bn1").args).training = false;
    EXPECT_STRATA_ERROR(r.emit(), "batch_norm_bwd (bn1)", "evaluation mode");
  }
  {
    HandResNetStep r;  // no gamma: strata would fill a temporary
    std::get<ops::BatchNormFwdArgs>(r.at(OpId::batch_norm_fwd, "layer1.0.downsample.1").args).gamma = {};
    EXPECT_STRATA_ERROR(r.emit(), "batch_norm_fwd (layer1.0.downsample.1)", "affine batch norm only");
  }
  {
    HandResNetStep r;  // a channels-last activation
    auto& a = std::get<ops::BatchNormFwdArgs>(r.at(OpId::batch_norm_fwd, "bn1").args);
    a.x.strides = Shape{36, 1, 12, 4};
    EXPECT_STRATA_ERROR(r.emit(), "batch_norm_fwd (bn1) x", "dense f32 NCHW");
  }
}

// Compiles and links model_train with the CUDA toolkit and cuDNN (no GPU needed).
TEST(CodegenCudaResNetTrain, TheProjectBuilds) {
#ifndef STRATA_TEST_CUDA_BUILD
  GTEST_SKIP() << "no CUDA compiler or cuDNN found when strata was configured";
#else
  HandResNetStep r;
  testing::expect_project_builds(r.emit(), "strata_codegen_cuda_resnet_train", "model_train");
#endif
}

}  // namespace
}  // namespace strata
