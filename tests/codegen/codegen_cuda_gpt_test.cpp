// The cuda emitter's GPT forward (codegen/cuda/transformer_text.cpp), without a GPU: a one-block
// GPT's prediction recorded by hand (the calls strata's cuda backend reports for it in f32, with
// the forms and library calls it reports) is written out, checked for the launches it must
// carry and for its refusals, and the project is compiled with the CUDA toolkit and cuDNN where
// this machine has them. Recording on the GPU and running what comes out, against strata's
// logits, is tools/gpu/codegen_cuda.sh's (its gpt cases).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "strata/codegen/buffer_map.h"
#include "strata/codegen/cuda/emitter.h"
#include "cuda_project_util.h"
#include "hand_record.h"
#include "support/expect_error.h"

namespace strata {
namespace {

using namespace testing;

// B = 2 sequences of T = 4 tokens, width C = 32 in H = 2 heads of D = 16, a vocabulary of V = 50,
// one block. 8 rows: more than the few-rows kernel takes, so the linears are cuBLAS's; in f32 the
// backend composes c_proj's residual and c_fc's GELU of its own ops, each reported as its parts.
struct HandGpt {
  static constexpr int64_t B = 2, T = 4, C = 32, H = 2, D = 16, V = 50, kBlock = 8, R = B * T;
  alignas(64) std::byte arena[24576] = {};
  alignas(64) std::byte consts[65536] = {};
  alignas(64) std::byte input_buffer[64] = {};
  alignas(64) int64_t input[B * T] = {3, 1, 4, 1, 5, 9, 2, 6};
  codegen::RecordedStep step;
  std::map<const void*, std::string> names;
  int64_t arena_used = 0, consts_used = 0;
  int group = -1;

  // A dense view of `sizes` at the next 64-byte aligned place in the arena (planned) or among the
  // constants (named).
  TensorView planned(const Shape& sizes, DType dt = DType::f32) {
    const TensorView v = view(arena + arena_used, sizes, dt);
    arena_used += (sizes.numel() * static_cast<int64_t>(dtype_size(dt)) + 63) / 64 * 64;
    return v;
  }
  TensorView constant(const std::string& name, const Shape& sizes, DType dt = DType::f32) {
    const TensorView v = view(consts + consts_used, sizes, dt);
    names[v.data] = name;
    consts_used += (sizes.numel() * static_cast<int64_t>(dtype_size(dt)) + 63) / 64 * 64;
    return v;
  }

  codegen::RecordedCall& add(OpId op, codegen::RecordedArgs args, std::string layer, std::vector<LibraryCall> library,
                             int composed = -1) {
    codegen::RecordedCall call;
    call.op = op;
    call.args = std::move(args);
    call.layer = std::move(layer);
    call.library = std::move(library);
    call.composed = composed;
    call.composed_op = OpId::linear_fwd;
    step.calls.push_back(std::move(call));
    return step.calls.back();
  }
  // A plain linear as the backend runs it past 4 rows: the bias broadcast into y, then cublasGemmEx
  // with beta 1 (y^T = w x^T in cuBLAS's column-major terms).
  void linear(const TensorView& x, const TensorView& w, const TensorView& b, const TensorView& y,
              const std::string& layer, int composed) {
    const int64_t n = w.sizes[0], k = w.sizes[1];
    LibraryCall g = gemm(1, 0, n, R, k, k, k, n, w.data, x.data, y.data);
    g.beta = 1.f;
    add(OpId::linear_fwd, ops::LinearFwdArgs{x, w, b, y}, layer, {lib(Kind::convert), g}, composed);
  }
  void layer_norm(const TensorView& x, const std::string& prefix, int64_t form, TensorView& y) {
    y = planned(Shape{R, C});
    const TensorView mean = planned(Shape{R}), rstd = planned(Shape{R});
    const TensorView w = constant(prefix + ".weight", Shape{C}), b = constant(prefix + ".bias", Shape{C});
    add(OpId::layer_norm_fwd, ops::LayerNormFwdArgs{x, w, b, y, mean, rstd, 1e-5}, prefix,
        {lib(Kind::layer_norm, form)});
  }

  HandGpt() {
    for (int64_t i = 0; i < static_cast<int64_t>(sizeof consts) / 4; ++i)
      reinterpret_cast<float*>(consts)[i] = static_cast<float>(i % 11) * 0.01f - 0.05f;
    step.model = "a hand-recorded GPT";
    step.arena.base = arena;
    step.arena.bytes = sizeof arena;
    step.cudnn_version = 91900;
    const TensorView ids = view(input, Shape{B, T}, DType::i64), ids_in = view(input_buffer, Shape{B, T}, DType::i64);
    step.input = ids;
    step.input_buffer = ids_in;
    LibraryCall h2d = lib(Kind::memcpy);
    h2d.m = 64;
    add(OpId::copy, ops::CopyArgs{ids, ids_in}, "input", {h2d});

    // The token and position lookups (Embedding: the ids as one row of R), their sum with the
    // positions read broadcast over the batch.
    const TensorView wte = constant("wte.weight", Shape{V, C}), wpe = constant("wpe.weight", Shape{kBlock, C});
    const TensorView pos = constant("wpe indices (4)", Shape{T}, DType::i64);
    for (int64_t t = 0; t < T; ++t) static_cast<int64_t*>(pos.data)[t] = t;
    step.host_bytes[pos.data] = std::string(static_cast<const char*>(pos.data), T * 8);
    const TensorView tok = planned(Shape{R, C}), at = planned(Shape{T, C});
    TensorView flat = ids_in;
    flat.sizes = Shape{R};
    flat.strides = Shape{1};
    add(OpId::index_select, ops::IndexSelectArgs{wte, flat, tok, 0}, "wte", {lib(Kind::own_kernel)});
    add(OpId::index_select, ops::IndexSelectArgs{wpe, pos, at, 0}, "wpe", {lib(Kind::own_kernel)});
    TensorView tok3 = tok, at3 = at;
    tok3.sizes = at3.sizes = Shape{B, T, C};
    tok3.strides = Shape{T * C, C, 1};
    at3.strides = Shape{0, C, 1};
    const TensorView x0 = planned(Shape{B, T, C});
    add(OpId::add, ops::AddArgs{tok3, at3, x0}, "", {lib(Kind::own_kernel)});
    TensorView x0r = x0;
    x0r.sizes = Shape{R, C};
    x0r.strides = Shape{C, 1};

    // Attention: ln_1, the QKV product, the heads read in place from its rows, c_proj with the residual.
    TensorView ln1;
    layer_norm(x0r, "h.0.ln_1", -1, ln1);
    const TensorView qkv = planned(Shape{R, 3 * C});
    linear(ln1, constant("h.0.attn.c_attn.weight", Shape{3 * C, C}), constant("h.0.attn.c_attn.bias", Shape{3 * C}),
           qkv, "h.0.attn.c_attn", -1);
    const auto heads = [&](const TensorView& rows, int64_t offset, int64_t row) {
      TensorView v = rows;
      v.data = static_cast<float*>(rows.data) + offset;
      v.sizes = Shape{B, H, T, D};
      v.strides = Shape{T * row, D, row, 1};
      return v;
    };
    const TensorView y = planned(Shape{R, C}), lse = planned(Shape{B, H, T});
    ops::AttentionFwdArgs att{heads(qkv, 0, 3 * C), heads(qkv, C, 3 * C), heads(qkv, 2 * C, 3 * C), heads(y, 0, C),
                              lse, {}, 0.25, true};
    LibraryCall whole = lib(Kind::attention);
    whole.m = 1024;  // 16 queries: fewer blocks than the GPU has SMs, so the widest block
    whole.k = (T + 3 * D + 1024 + 32) * 4;
    add(OpId::attention_fwd, att, "h.0.attn", {whole});
    const TensorView h = planned(Shape{R, C});
    linear(y, constant("h.0.attn.c_proj.weight", Shape{C, C}), constant("h.0.attn.c_proj.bias", Shape{C}), h,
           "h.0.attn.c_proj", ++group);
    add(OpId::add, ops::AddArgs{h, x0r, h}, "h.0.attn.c_proj", {lib(Kind::own_kernel)}, group);

    // The MLP: ln_2, c_fc into pre then GELU, c_proj with the residual.
    TensorView ln2;
    layer_norm(h, "h.0.ln_2", 32, ln2);
    const TensorView pre = planned(Shape{R, 4 * C}), act = planned(Shape{R, 4 * C});
    linear(ln2, constant("h.0.mlp.c_fc.weight", Shape{4 * C, C}), constant("h.0.mlp.c_fc.bias", Shape{4 * C}), pre,
           "h.0.mlp.c_fc", ++group);
    add(OpId::unary_fwd, ops::UnaryFwdArgs{pre, act, ops::UnaryFn::gelu_tanh}, "h.0.mlp.c_fc", {lib(Kind::unary, 1)},
        group);
    const TensorView out = planned(Shape{R, C});
    linear(act, constant("h.0.mlp.c_proj.weight", Shape{C, 4 * C}), constant("h.0.mlp.c_proj.bias", Shape{C}), out,
           "h.0.mlp.c_proj", ++group);
    add(OpId::add, ops::AddArgs{out, h, out}, "h.0.mlp.c_proj", {lib(Kind::own_kernel)}, group);

    // ln_f, then the logits as matmul folds them: one batch of R rows times wte^T (column-major).
    TensorView lnf;
    layer_norm(out, "ln_f", 256, lnf);
    const TensorView logits = planned(Shape{1, R, V});
    TensorView rows = lnf, wt = wte;
    rows.sizes = Shape{1, R, C};
    rows.strides = Shape{R * C, C, 1};
    wt.sizes = Shape{1, C, V};
    wt.strides = Shape{V * C, 1, C};
    LibraryCall g = lib(Kind::gemm_batched, 68);
    g.op_a = 1, g.op_b = 0, g.m = V, g.n = R, g.k = C, g.lda = C, g.ldb = C, g.ldc = V;
    g.batch = 1, g.a = wte.data, g.b = lnf.data, g.c = logits.data;
    add(OpId::bmm, ops::BmmArgs{rows, wt, logits}, "lm_head", {g});
    step.output = view(logits.data, Shape{B, T, V});
  }

  std::vector<codegen::GeneratedFile> emit() {
    codegen::BufferMap buffers(step, names);
    return codegen::cuda::emit_project(step, buffers);
  }
  codegen::RecordedCall& first(OpId op) {
    for (codegen::RecordedCall& c : step.calls)
      if (c.op == op) return c;
    throw std::logic_error("no such call");
  }
};

TEST(CodegenCudaGpt, WritesEveryCallInTheFormStrataRan) {
  HandGpt r;
  const auto files = r.emit();
  const std::string cpp = file(files, "model.cpp"), cu = file(files, "kernels.cu"), h = file(files, "model.h");
  // The token ids from the input buffer, the positions from the weights file (the model's constant),
  // each over strata's indexing of (x at the row's origin, the position, y).
  EXPECT_TRUE(has(cpp, "kernels::index_select(stream, nd, n, sizes, s0, s1, s2, f32(w + 0), "
                       "reinterpret_cast<const int64_t*>(in + 0), 1, 32, 50, f32(a + 0));"))
      << cpp;
  EXPECT_TRUE(has(cpp, "reinterpret_cast<const int64_t*>(w + 6400), 1, 32, 8, f32(a + 1024));"));
  // The positions read broadcast over the batch: strata's strided add, its dims merged as strata's are.
  EXPECT_TRUE(has(cpp, "const int64_t sizes[] = {2, 128}, s0[] = {128, 1}, s1[] = {0, 1}, s2[] = {128, 1};"));
  EXPECT_TRUE(has(cpp, "kernels::add_strided(stream, nd, n, sizes, s0, s1, s2, f32(a + 0), f32(a + 1024), "
                       "f32(a + 1536));"));
  // Each layer norm in the form strata ran: in registers (-1), a warp a row (32), a block a row (256).
  EXPECT_TRUE(has(cpp, "kernels::layer_norm(stream, -1, f32(a + 1536), 32, 1, f32(w + 7616), 1, f32(w + 7488), 1,"));
  EXPECT_TRUE(has(cpp, "f32(a + 2560), 32, 1, f32(a + 3584), 1, f32(a + 3648), 1, 8, 32, 1.0000000000000001e-05);"));
  EXPECT_TRUE(has(cpp, "kernels::layer_norm(stream, 32, f32(a + 7872), 32, 1,"));
  EXPECT_TRUE(has(cpp, "kernels::layer_norm(stream, 256, f32(a + 18240), 32, 1,"));
  // The linears as cuBLAS ran them, the bias first broadcast into y (beta 1).
  EXPECT_TRUE(has(cpp, "cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, 96, 8, 32, &kOne,\n"
                       "                     w + 8128, CUDA_R_32F, 32, a + 2560, CUDA_R_32F, 32,\n"
                       "                     &kOne, a + 3712, CUDA_R_32F, 96, static_cast<cublasComputeType_t>(68)"));
  EXPECT_TRUE(has(cpp, "kernels::convert(stream, 2, 768, sizes, src, dst, f32(w + 7744), f32(a + 3712));"));
  EXPECT_TRUE(has(cpp, "cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, 32, 8, 128, &kOne,"));
  // The heads read in place from the QKV rows, y written side by side; the threads and shared
  // memory strata launched with.
  EXPECT_TRUE(has(cpp, "kernels::attention(stream, 1024, 4432, f32(a + 3712), {384, 16, 96, 1}, f32(a + 3840), "
                       "{384, 16, 96, 1},\n                    f32(a + 3968), {384, 16, 96, 1}, f32(a + 6784), "
                       "{128, 16, 32, 1},\n                    f32(a + 7808), {8, 4, 1}, 2, 2, 4, 4, 16, true, 0.25);"));
  // The composed epilogues as their parts: the residual added in place, GELU after the product.
  EXPECT_TRUE(has(cpp, "kernels::add(stream, f32(a + 7872), f32(a + 1536), f32(a + 7872), 256);"));
  EXPECT_TRUE(has(cpp, "kernels::gelu_tanh(stream, f32(a + 10048), f32(a + 14144), 1024, 0.0, 0.0);"));
  EXPECT_TRUE(has(cpp, "kernels::add(stream, f32(a + 18240), f32(a + 7872), f32(a + 18240), 256);"));
  // The tied output projection: wte read column-major, one batch.
  EXPECT_TRUE(has(cpp, "cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, 50, 8, 32, &alpha,\n"
                       "        w + 0, CUDA_R_32F, 32, 0, a + 19264, CUDA_R_32F, 32, 0,\n"
                       "        &beta, a + 20416, CUDA_R_32F, 50, 0, 1, static_cast<cublasComputeType_t>(68), "
                       "CUBLAS_GEMM_DEFAULT));"))
      << cpp;
  // Token ids in, refused before any call when out of the vocabulary; the logits out.
  EXPECT_TRUE(has(cpp, "void Model::run(const int64_t* input, float* output) {"));
  EXPECT_TRUE(has(cpp, "if (input[i] < 0 || input[i] >= kInputLimit)"));
  EXPECT_TRUE(has(cpp, "cudaMemcpyAsync(in + 0, input, 64, cudaMemcpyHostToDevice"));
  EXPECT_TRUE(has(cpp, "cudaMemcpyAsync(output, a + 20416, 1600, cudaMemcpyDeviceToHost"));
  EXPECT_TRUE(has(cpp, "input [2,4] token ids, backend cuda"));
  EXPECT_TRUE(has(h, "inline constexpr int64_t kInputLimit = 50;")) << h;
  EXPECT_TRUE(has(h, "inline constexpr int64_t kOutputSizes[3] = {2, 4, 50};"));
  const std::string main = file(files, "main.cpp");
  EXPECT_TRUE(has(main, "read_npy<int64_t>(args[1], in_shape)")) << main;
  EXPECT_TRUE(has(main, "check_range(x, generated::kInputLimit, args[1], \"token\")"));
  // kernels.cu: strata's kernels this model launches, and no others.
  for (const char* k : {"layer_norm_fwd_kernel<G, float, float><<<", "layer_norm_fwd_rows_kernel<K, float, float><<<",
                        "attention_fwd_kernel(View4<const T> q",
                        "struct AttnShape", "struct IndexSelectK", "struct BinaryFn", "dense_binary_kernel",
                        "struct ConvertFn", "gelu_tanh_kernel", "STRATA_UNARY(gelu_tanh, 0,"})
    EXPECT_TRUE(has(cu, k)) << k;
  for (const char* k : {"attention_fwd_split_kernel", "attention_decode", "layer_norm_bwd", "conv_epilogue",
                        "gap_fwd_kernel", "gemv_kernel", "space_to_depth_kernel", "softmax_xent", "namespace ops {"})
    EXPECT_FALSE(has(cu, k)) << k;
  // The positions are in the weights file, in the order the calls read the constants.
  const std::string bin = file(files, "weights.bin");
  const int64_t positions[4] = {0, 1, 2, 3};
  ASSERT_GE(bin.size(), 24u + 6400u + 32u);
  EXPECT_EQ(std::memcmp(bin.data() + 24 + 6400, positions, sizeof positions), 0);
}

TEST(CodegenCudaGpt, NamesWhatItDoesNotWriteOut) {
  const std::pair<int64_t, const char*> forms[] = {{1, "strata's split-keys kernel"},
                                                   {2, "strata's decoding kernel"},
                                                   {3, "cuBLAS products around strata's softmax"},
                                                   {4, "cuDNN's fused attention"}};
  for (const auto& [form, says] : forms) {
    HandGpt r;
    r.first(OpId::attention_fwd).library = {lib(Kind::attention_other, form)};
    EXPECT_STRATA_ERROR(r.emit(), "attention_fwd (h.0.attn) ran as ", says, "the whole-row attention kernel only");
  }
  {
    HandGpt r;  // a decoding step over a static cache: the keys held read on the device
    int64_t held = 4;
    std::get<ops::AttentionFwdArgs>(r.first(OpId::attention_fwd).args).kv_len = view(&held, Shape{}, DType::i64);
    EXPECT_STRATA_ERROR(r.emit(), "attention_fwd (h.0.attn) reads a key/value cache",
                        "attention over a whole sequence only");
  }
  {
    HandGpt r;  // logits of a padded vocabulary: the first V columns of wider rows
    r.step.output.strides = Shape{4 * 64, 64, 1};
    EXPECT_STRATA_ERROR(r.emit(), "is a strided view of the last call's (a padded vocabulary)", "dense outputs only");
  }
  {
    HandGpt r;  // a bf16 model's logits
    r.step.output.dtype = DType::bf16;
    EXPECT_STRATA_ERROR(r.emit(), "the model takes i64 and returns bf16", "f32 models only");
  }
  {
    HandGpt r;  // one call in another dtype (a compute dtype the model casts to)
    std::get<ops::LayerNormFwdArgs>(r.first(OpId::layer_norm_fwd).args).x.dtype = DType::bf16;
    EXPECT_STRATA_ERROR(r.emit(), "layer_norm_fwd (h.0.ln_1) is bf16", "f32 GPTs only");
  }
  {
    HandGpt r;
    std::get<ops::UnaryFwdArgs>(r.first(OpId::unary_fwd).args).fn = ops::UnaryFn::gelu;
    EXPECT_STRATA_ERROR(r.emit(), "unary_fwd (h.0.mlp.c_fc) computes gelu", "GELU (tanh form) only");
  }
  {
    HandGpt r;  // a position outside the table (the generator reads the model's indices)
    const auto& a = std::get<ops::IndexSelectArgs>(r.step.calls[2].args);
    const int64_t bad[4] = {0, 1, 9, 3};
    r.step.host_bytes[a.index.data] = std::string(reinterpret_cast<const char*>(bad), sizeof bad);
    EXPECT_STRATA_ERROR(r.emit(), "index_select (wpe): index 2 is 9, out of range [0, 8)");
  }
  {
    HandGpt r;  // token ids no lookup reads: nothing bounds them
    std::get<ops::IndexSelectArgs>(r.step.calls[1].args).index.data = r.arena + r.arena_used;
    EXPECT_STRATA_ERROR(r.emit(), "i64 input that no lookup reads");
  }
}

TEST(CodegenCudaGpt, TheProjectBuilds) {
#ifndef STRATA_TEST_CUDA_BUILD
  GTEST_SKIP() << "no CUDA compiler or cuDNN found when strata was configured";
#else
  HandGpt r;
  testing::expect_project_builds(r.emit(), "strata_codegen_cuda_gpt", "model_run");
#endif
}

}  // namespace
}  // namespace strata
