// Layer norm and attention on the cuda backend against the reference (backends/cpu/
// transformer_ops.h's loops, in double), in every float dtype (f16 and bf16 against the
// reference in f32 on the same rounded inputs): rows longer than a warp and than the column
// chunks of the weight gradient, permuted [B, T, H, D] operands, head dims below, between and
// above the block's width, sequences longer than the block, one query over a cache, and runs
// repeated for the same bits; and cuDNN's fused attention at GPT-like shapes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace strata::testing {
namespace {

STRATA_COVERS(layer_norm_fwd, "cuda_vs_reference");
STRATA_COVERS(layer_norm_bwd, "cuda_vs_reference");
STRATA_COVERS(attention_fwd, "cuda_vs_reference");
STRATA_COVERS(attention_bwd, "cuda_vs_reference");

class CudaTransformerOps : public CudaTest {};

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
DType stats(DType dt) { return dt == DType::f64 ? DType::f64 : DType::f32; }

// close(), or, where the exact gradient is zero (one normalised column, one key: it vanishes),
// rounding noise only: the fused multiply-adds of the GPU leave a product's rounding there.
::testing::AssertionResult near(const Tensor& got, const Tensor& want, double tol) {
  const std::vector<double> w = host_as(want, DType::f64).to_vector<double>();
  if (std::any_of(w.begin(), w.end(), [](double v) { return v != 0.0; })) return close(got, want, tol);
  double most = 0;
  for (double v : host_as(got, DType::f64).to_vector<double>()) most = std::max(most, std::abs(v));
  if (most <= 10 * tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |got| " << most << " where the answer is 0";
}

// Runs f; an exception fails the case `what` names and lets the other cases run.
template <class F>
bool ran(F&& f, const std::string& what) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
    return false;
  }
}

TEST_F(CudaTransformerOps, LayerNormMatchesTheReference) {
  struct Case {
    int64_t n, c;
  };
  for (DType dt : kFloats)
    for (const Case& k : {Case{130, 768}, Case{1, 1}, Case{7, 33}, Case{64, 5}, Case{1100, 768}, Case{400, 1024},
                           Case{333, 136}, Case{200, 1032}}) {
      const DType rd = ref_dtype(dt);
      const Tensor xb = random_tensor({k.n, k.c + 1}, dt, 1, -3.0, 3.0);
      const Tensor x = xb.narrow(1, 1, k.c), w = random_tensor({k.c}, dt, 2), b = random_tensor({k.c}, dt, 3);
      const Tensor dy = random_tensor({k.n, k.c}, dt, 4);
      const Tensor xg = to_gpu(xb).narrow(1, 1, k.c), wg = to_gpu(w), bg = to_gpu(b), dyg = to_gpu(dy);
      const Tensor yg = gpu_nan({k.n, k.c}, kNCHW, dt), mg = gpu_nan({k.n}, kNCHW, stats(dt)),
                   rg = gpu_nan({k.n}, kNCHW, stats(dt));
      be().layer_norm_fwd({xg, wg, bg, yg, mg, rg, 1e-5});
      const Tensor yr = cpu_nan({k.n, k.c}, kNCHW, rd), mr = cpu_nan({k.n}, kNCHW, stats(dt)),
                   rr = cpu_nan({k.n}, kNCHW, stats(dt));
      const Tensor xr = host_as(x, rd);
      ref_.layer_norm_fwd({xr, host_as(w, rd), host_as(b, rd), yr, mr, rr, 1e-5});
      const std::string what = std::string(dtype_name(dt)) + " " + std::to_string(k.n) + "x" + std::to_string(k.c);
      STRATA_EXPECT_CLOSE(host_as(yg, rd), yr, tol(dt, kTolReduction), what + " y");
      STRATA_EXPECT_CLOSE(host_as(rg, stats(dt)), rr, tol(dt, kTolReduction), what + " rstd");
      Tensor grads[2][3];
      for (int rep = 0; rep < 2; ++rep) {
        for (int i = 0; i < 3; ++i) grads[rep][i] = gpu_nan(i == 0 ? Shape{k.n, k.c} : Shape{k.c}, kNCHW, dt);
        be().layer_norm_bwd({xg, wg, mg, rg, dyg, grads[rep][0], grads[rep][1], grads[rep][2]});
      }
      const Tensor dxr = cpu_nan({k.n, k.c}, kNCHW, rd), dwr = cpu_nan({k.c}, kNCHW, rd), dbr = cpu_nan({k.c}, kNCHW, rd);
      ref_.layer_norm_bwd({xr, host_as(w, rd), mr, rr, host_as(dy, rd), dxr, dwr, dbr});
      // Weight gradients sum over the rows: a looser bound for the long columns.
      EXPECT_TRUE(near(host_as(grads[0][0], rd), dxr, tol(dt, kTolReduction))) << what << " dx";
      STRATA_EXPECT_CLOSE(host_as(grads[0][1], rd), dwr, tol(dt, 1e-4), what + " dweight");
      STRATA_EXPECT_CLOSE(host_as(grads[0][2], rd), dbr, tol(dt, 1e-4), what + " dbias");
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_values(to_cpu(grads[0][i]), to_cpu(grads[1][i]))) << what << " rerun " << i;
    }
}

// A thread takes a row's columns in chunks of eight, read as 16-byte vectors where the rows are
// contiguous and aligned: the same rows at an aligned address and one element off it (element
// loads; in the forward on many rows, the general kernel where aligned rows take the one holding
// them in registers) give the same bits, forward and backward, and the aligned ones match the
// reference.
TEST_F(CudaTransformerOps, LayerNormSameBitsWhateverTheRowsAlignment) {
  struct Case {
    int64_t n, c;
  };
  for (DType dt : kFloats)
    for (const Case& k : {Case{70, 768}, Case{70, 24}, Case{70, 37}, Case{1100, 768}, Case{1100, 40}}) {
      const int64_t n = k.n, c = k.c;
      const std::string what = std::string(dtype_name(dt)) + " " + std::to_string(n) + "x" + std::to_string(c);
      const Tensor x = random_tensor({n, c}, dt, 11, -3.0, 3.0), w = random_tensor({c}, dt, 12),
                   b = random_tensor({c}, dt, 13), dy = random_tensor({n, c}, dt, 14);
      const Tensor wg = to_gpu(w), bg = to_gpu(b);
      // Aligned: dense rows from the allocator. Off: the same values one element into each row.
      const Tensor aligned_x = to_gpu(x), aligned_dy = to_gpu(dy);
      const Tensor off_x = gpu_nan({n, c + 1}, kNCHW, dt).narrow(1, 1, c), off_dy = gpu_nan({n, c + 1}, kNCHW, dt).narrow(1, 1, c);
      copy_into(x, off_x);
      copy_into(dy, off_dy);
      Tensor out[2][6];
      const Tensor xs[2] = {aligned_x, off_x}, dys[2] = {aligned_dy, off_dy};
      for (int v = 0; v < 2; ++v) {
        out[v][0] = v == 0 ? gpu_nan({n, c}, kNCHW, dt) : gpu_nan({n, c + 1}, kNCHW, dt).narrow(1, 1, c);
        out[v][1] = gpu_nan({n}, kNCHW, stats(dt));
        out[v][2] = gpu_nan({n}, kNCHW, stats(dt));
        be().layer_norm_fwd({xs[v], wg, bg, out[v][0], out[v][1], out[v][2], 1e-5});
        out[v][3] = v == 0 ? gpu_nan({n, c}, kNCHW, dt) : gpu_nan({n, c + 1}, kNCHW, dt).narrow(1, 1, c);
        out[v][4] = gpu_nan({c}, kNCHW, dt);
        out[v][5] = gpu_nan({c}, kNCHW, dt);
        be().layer_norm_bwd({xs[v], wg, out[v][1], out[v][2], dys[v], out[v][3], out[v][4], out[v][5]});
      }
      for (int i = 0; i < 6; ++i) EXPECT_TRUE(same_values(out[0][i], out[1][i])) << what << " output " << i;
      const DType rd = ref_dtype(dt);
      const Tensor yr = cpu_nan({n, c}, kNCHW, rd), mr = cpu_nan({n}, kNCHW, stats(dt)), rr = cpu_nan({n}, kNCHW, stats(dt));
      ref_.layer_norm_fwd({host_as(x, rd), host_as(w, rd), host_as(b, rd), yr, mr, rr, 1e-5});
      STRATA_EXPECT_CLOSE(host_as(out[0][0], rd), yr, tol(dt, kTolReduction), what + " y, aligned rows");
    }
}

// Each case runs with cuDNN's fused attention allowed and not: sequences of 64 and more then
// take the cuBLAS GEMM path in every dtype but f64 (counted), shorter ones strata's kernels.
class CudaAttentionPaths : public CudaTransformerOps, public ::testing::WithParamInterface<bool> {
 protected:
  void TearDown() override {
    if (gpu_skip_reason().empty()) be().set_cudnn_attention(true);
    CudaTransformerOps::TearDown();
  }
};

TEST_P(CudaAttentionPaths, AttentionMatchesTheReference) {
  const bool cudnn = GetParam();
  be().set_cudnn_attention(cudnn);
  struct Case {
    int64_t b, h, tq, tk, d;
    bool causal;
  };
  for (DType dt : kFloats)
    for (const Case& c : {Case{2, 3, 37, 37, 64, true}, Case{1, 2, 1, 300, 64, true}, Case{1, 1, 5, 9, 80, false},
                          Case{2, 2, 17, 17, 160, true}, Case{1, 1, 1, 1, 8, true}, Case{1, 4, 200, 200, 16, true},
                          Case{2, 3, 128, 128, 64, true}, Case{1, 2, 70, 150, 32, true}, Case{1, 2, 96, 130, 24, false}}) {
      const size_t gemm_before = backends::cuda::attention_path_counts().gemm;
      const DType rd = ref_dtype(dt);
      // q, k, v as the permuted heads of [B, T, H, D] tensors, as a fused projection gives them.
      const Tensor qb = random_tensor({c.b, c.tq, c.h, c.d}, dt, 5), kb = random_tensor({c.b, c.tk, c.h, c.d}, dt, 6),
                   vb = random_tensor({c.b, c.tk, c.h, c.d}, dt, 7);
      const Tensor dy = random_tensor({c.b, c.h, c.tq, c.d}, dt, 8);
      const auto heads = [](const Tensor& t) { return t.permute({0, 2, 1, 3}); };
      const Tensor qg = heads(to_gpu(qb)), kg = heads(to_gpu(kb)), vg = heads(to_gpu(vb)), dyg = to_gpu(dy);
      const Tensor qr = heads(host_as(qb, rd)), kr = heads(host_as(kb, rd)), vr = heads(host_as(vb, rd));
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      const Shape ys{c.b, c.h, c.tq, c.d}, ls{c.b, c.h, c.tq};
      const std::string what = std::string(dtype_name(dt)) + " tq " + std::to_string(c.tq) + " tk " +
                               std::to_string(c.tk) + " d " + std::to_string(c.d) + (c.causal ? " causal" : "");
      const Tensor yg = gpu_nan(ys, kNCHW, dt), lg = gpu_nan(ls, kNCHW, stats(dt));
      if (!ran([&] { be().attention_fwd({qg, kg, vg, yg, lg, {}, scale, c.causal}); }, what + " forward")) continue;
      const Tensor yr = cpu_nan(ys, kNCHW, rd), lr = cpu_nan(ls, kNCHW, stats(dt));
      ref_.attention_fwd({qr, kr, vr, yr, lr, {}, scale, c.causal});
      STRATA_EXPECT_CLOSE(host_as(yg, rd), yr, tol(dt, kTolReduction), what + " y");
      STRATA_EXPECT_CLOSE(host_as(lg, stats(dt)), lr, tol(dt, kTolReduction), what + " lse");
      Tensor g[2][4];
      bool bwd_ran = true;
      for (int rep = 0; rep < 2 && bwd_ran; ++rep) {
        g[rep][0] = gpu_nan(ls, kNCHW, stats(dt));
        g[rep][1] = gpu_nan(qg.sizes(), kNCHW, dt);
        g[rep][2] = gpu_nan(kg.sizes(), kNCHW, dt);
        g[rep][3] = gpu_nan(vg.sizes(), kNCHW, dt);
        bwd_ran = ran(
            [&] { be().attention_bwd({qg, kg, vg, yg, lg, dyg, g[rep][0], g[rep][1], g[rep][2], g[rep][3], {}, scale, c.causal}); },
            what + " backward");
      }
      if (!bwd_ran) continue;
      const Tensor delta = cpu_nan(ls, kNCHW, stats(dt)), dq = cpu_nan(qg.sizes(), kNCHW, rd),
                   dk = cpu_nan(kg.sizes(), kNCHW, rd), dv = cpu_nan(vg.sizes(), kNCHW, rd);
      ref_.attention_bwd({qr, kr, vr, yr, lr, host_as(dy, rd), delta, dq, dk, dv, {}, scale, c.causal});
      EXPECT_TRUE(near(host_as(g[0][1], rd), dq, tol(dt, 1e-4))) << what << " dq";
      EXPECT_TRUE(near(host_as(g[0][2], rd), dk, tol(dt, 1e-4))) << what << " dk";
      STRATA_EXPECT_CLOSE(host_as(g[0][3], rd), dv, tol(dt, 1e-4), what + " dv");
      for (int i = 1; i < 4; ++i) EXPECT_TRUE(same_values(to_cpu(g[0][i]), to_cpu(g[1][i]))) << what << " rerun " << i;
      if (!cudnn && dt != DType::f64 && c.tq >= 64 && c.tk >= 64) {  // a forward and two backwards
        EXPECT_EQ(backends::cuda::attention_path_counts().gemm - gemm_before, 3u) << what << ": not on the GEMM path";
      }
    }
}
INSTANTIATE_TEST_SUITE_P(CudnnAllowed, CudaAttentionPaths, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "cudnn" : "no_cudnn"; });

// cuDNN's fused flash attention (attention_cudnn.cpp) at GPT-like shapes, f16 and bf16: q, k, v
// the heads of one fused [B, T, 3, H, D] projection (arbitrary batch, head and time strides),
// against the reference in f32 on the same rounded inputs. The fused counters say cuDNN ran
// each call (a Hopper GPU with cuDNN 9 takes these shapes); without them this test would pass
// on strata's own kernels alone.
TEST_F(CudaTransformerOps, FusedCudnnAttentionMatchesTheReference) {
  struct Case {
    int64_t b, h, t, d;
    bool causal;
  };
  for (DType dt : {DType::f16, DType::bf16})
    for (const Case& c : {Case{2, 4, 128, 64, true}, Case{1, 12, 256, 64, true}, Case{2, 4, 128, 64, false}}) {
      const DType rd = ref_dtype(dt);
      const Tensor qkv = random_tensor({c.b, c.t, 3, c.h, c.d}, dt, 50), dy = random_tensor({c.b, c.h, c.t, c.d}, dt, 51);
      const auto head = [&](const Tensor& t, int i) {  // [B, T, 3, H, D] -> part i as [B, H, T, D]
        const Tensor n = t.narrow(2, i, 1);
        const Shape st = n.strides();
        return n.as_strided({c.b, c.h, c.t, c.d}, {st[0], st[3], st[1], st[4]}, n.offset());
      };
      const Tensor g = to_gpu(qkv), r = host_as(qkv, rd), dyg = to_gpu(dy);
      const Tensor qg = head(g, 0), kg = head(g, 1), vg = head(g, 2), qr = head(r, 0), kr = head(r, 1), vr = head(r, 2);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      const Shape ys{c.b, c.h, c.t, c.d}, ls{c.b, c.h, c.t};
      const std::string what = std::string(dtype_name(dt)) + " b " + std::to_string(c.b) + " h " +
                               std::to_string(c.h) + " t " + std::to_string(c.t) + (c.causal ? " causal" : "");
      const size_t before = backends::cuda::attention_path_counts().cudnn;
      const Tensor yg = gpu_nan(ys, kNCHW, dt), lg = gpu_nan(ls, kNCHW, DType::f32);
      if (!ran([&] { be().attention_fwd({qg, kg, vg, yg, lg, {}, scale, c.causal}); }, what + " forward")) continue;
      EXPECT_EQ(backends::cuda::attention_path_counts().cudnn - before, 1u) << what << ": cuDNN did not run the forward";
      const Tensor yr = cpu_nan(ys, kNCHW, rd), lr = cpu_nan(ls, kNCHW, DType::f32);
      ref_.attention_fwd({qr, kr, vr, yr, lr, {}, scale, c.causal});
      STRATA_EXPECT_CLOSE(host_as(yg, rd), yr, tol(dt, kTolReduction), what + " y");
      STRATA_EXPECT_CLOSE(host_as(lg, DType::f32), lr, tol(dt, kTolReduction), what + " lse");
      const Tensor delta = gpu_nan(ls, kNCHW, DType::f32), dq = gpu_nan(qg.sizes(), kNCHW, dt),
                   dk = gpu_nan(kg.sizes(), kNCHW, dt), dv = gpu_nan(vg.sizes(), kNCHW, dt);
      if (!ran([&] { be().attention_bwd({qg, kg, vg, yg, lg, dyg, delta, dq, dk, dv, {}, scale, c.causal}); },
               what + " backward"))
        continue;
      EXPECT_EQ(backends::cuda::attention_path_counts().cudnn - before, 2u) << what << ": cuDNN did not run the backward";
      const Tensor deltar = cpu_nan(ls, kNCHW, DType::f32), dqr = cpu_nan(qg.sizes(), kNCHW, rd),
                   dkr = cpu_nan(kg.sizes(), kNCHW, rd), dvr = cpu_nan(vg.sizes(), kNCHW, rd);
      ref_.attention_bwd({qr, kr, vr, yr, lr, host_as(dy, rd), deltar, dqr, dkr, dvr, {}, scale, c.causal});
      EXPECT_TRUE(near(host_as(dq, rd), dqr, tol(dt, 1e-4))) << what << " dq";
      EXPECT_TRUE(near(host_as(dk, rd), dkr, tol(dt, 1e-4))) << what << " dk";
      STRATA_EXPECT_CLOSE(host_as(dv, rd), dvr, tol(dt, 1e-4), what + " dv");
    }
}

// f32 never goes to cuDNN: 64 queries and keys run as cuBLAS GEMMs, a decoding step's one
// query by strata's kernels.
TEST_F(CudaTransformerOps, F32AttentionRunsAsGemmsOrKernels) {
  const Tensor q = to_gpu(random_tensor({1, 2, 64, 64}, DType::f32, 52)), k = to_gpu(random_tensor({1, 2, 64, 64}, DType::f32, 53)),
               v = to_gpu(random_tensor({1, 2, 64, 64}, DType::f32, 54));
  const auto before = backends::cuda::attention_path_counts();
  be().attention_fwd({q, k, v, gpu_nan({1, 2, 64, 64}), gpu_nan({1, 2, 64}), {}, 0.125, true});
  auto now = backends::cuda::attention_path_counts();
  EXPECT_EQ(now.cudnn, before.cudnn);
  EXPECT_EQ(now.gemm, before.gemm + 1);
  be().attention_fwd({q.narrow(2, 63, 1), k, v, gpu_nan({1, 2, 1, 64}), gpu_nan({1, 2, 1}), {}, 0.125, true});
  now = backends::cuda::attention_path_counts();
  EXPECT_EQ(now.own_kernels, before.own_kernels + 1);
}

// A static cache read by the kernel: kv_len on the device, the keys past it never read. One query
// per head over a 300-key cache, 129 of them held: one block per row (the default for a cache this
// short) and the keys split over blocks (flash-decoding, Settings::attention_split_min_keys).
TEST_F(CudaTransformerOps, KvLenOnTheDeviceLimitsTheKeys) {
  const int64_t tmax = 300, l = 129;
  const int64_t by_default = backends::cuda::Settings{}.attention_split_min_keys;
  ASSERT_GT(by_default, tmax) << "the first pass is meant to run one block per row";
  struct Restore {
    backends::CudaBackend& b;
    int64_t keys;
    ~Restore() { b.set_attention_split_min_keys(keys); }
  } restore{be(), by_default};
  for (const int64_t split_from : {by_default, int64_t{0}})
  for (DType dt : kFloats) {
    be().set_attention_split_min_keys(split_from);
    const DType rd = ref_dtype(dt);
    const Tensor q = random_tensor({1, 12, 1, 64}, dt, 40), k = random_tensor({1, 12, tmax, 64}, dt, 41),
                 v = random_tensor({1, 12, tmax, 64}, dt, 42);
    const Tensor yg = gpu_nan({1, 12, 1, 64}, kNCHW, dt), lg = gpu_nan({1, 12, 1}, kNCHW, stats(dt));
    be().attention_fwd({to_gpu(q), to_gpu(k), to_gpu(v), yg, lg, to_gpu(Tensor::from_vector<int64_t>({l}, {1})), 0.125, true});
    const Tensor yr = cpu_nan({1, 12, 1, 64}, kNCHW, rd), lr = cpu_nan({1, 12, 1}, kNCHW, stats(dt));
    ref_.attention_fwd({host_as(q, rd), host_as(k, rd).narrow(2, 0, l), host_as(v, rd).narrow(2, 0, l), yr, lr, {}, 0.125, true});
    const std::string what = std::string(dtype_name(dt)) + (split_from == 0 ? " kv_len, keys split" : " kv_len");
    STRATA_EXPECT_CLOSE(host_as(yg, rd), yr, tol(dt, kTolReduction), what + " y");
    STRATA_EXPECT_CLOSE(host_as(lg, stats(dt)), lr, tol(dt, kTolReduction), what + " lse");
  }
}

// A decoding step's new rows written into the cache by the attention op (AttentionFwdArgs::k_new):
// one query per head with head dims of 16-byte vectors read by 1 to 16 lanes (the decoding
// kernel, which writes the rows itself), a head dim it does not take (24 in f16/bf16: three
// vectors) and two queries per head (the rows written first, then the other kernels), f64 (never
// the decoding kernel). The cache's rows must hold the new ones bit for bit and every other row
// be left alone; y and lse as the reference's, which writes the rows the same way.
TEST_F(CudaTransformerOps, NewRowsWrittenIntoTheCacheThenAttended) {
  const int64_t tmax = 300, l = 129;
  for (DType dt : kFloats)
    for (const auto& [tq, D, H] : {std::tuple{1, 64, 12}, std::tuple{1, 128, 4}, std::tuple{1, 16, 3},
                                   std::tuple{1, 24, 2}, std::tuple{2, 64, 3}, std::tuple{1, 8, 1}}) {
      const DType rd = ref_dtype(dt);
      const std::string what = std::string(dtype_name(dt)) + " tq " + std::to_string(tq) + " D " + std::to_string(D);
      const Tensor k = random_tensor({1, H, tmax, D}, dt, 50), v = random_tensor({1, H, tmax, D}, dt, 51);
      // q and the new rows as the heads of one fused [B, T, 3, H, D] projection.
      const Tensor qkv = random_tensor({1, tq, 3, H, D}, dt, 52);
      const auto head = [&](int i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };
      std::vector<int64_t> at;
      for (int64_t t = 0; t < tq; ++t) at.push_back(l - tq + t);
      const Tensor pos = Tensor::from_vector<int64_t>(at, {tq}), len = Tensor::from_vector<int64_t>({l}, {1});
      const Tensor kg = to_gpu(k), vg = to_gpu(v), qkvg = to_gpu(qkv);
      const auto head_g = [&](int i) { return qkvg.select(2, i).permute({0, 2, 1, 3}); };
      const Tensor yg = gpu_nan({1, H, tq, D}, kNCHW, dt), lg = gpu_nan({1, H, tq}, kNCHW, stats(dt));
      const Tensor qg = head_g(0), kng = head_g(1), vng = head_g(2), leng = to_gpu(len), posg = to_gpu(pos);
      ops::AttentionFwdArgs a{qg, kg, vg, yg, lg, leng, 1.0 / std::sqrt(static_cast<double>(D)), true};
      a.k_new = kng;
      a.v_new = vng;
      a.positions = posg;
      if (!ran([&] { be().attention_fwd(a); }, what)) continue;
      // The reference's operands are named: an argument view does not keep its tensor alive.
      const Tensor kr = host_as(k, rd), vr = host_as(v, rd), qr = host_as(head(0), rd), knr = host_as(head(1), rd),
                   vnr = host_as(head(2), rd);
      const Tensor yr = cpu_nan({1, H, tq, D}, kNCHW, rd), lr = cpu_nan({1, H, tq}, kNCHW, stats(dt));
      ops::AttentionFwdArgs r{qr, kr, vr, yr, lr, len, a.scale, true};
      r.k_new = knr;
      r.v_new = vnr;
      r.positions = pos;
      ref_.attention_fwd(r);
      EXPECT_TRUE(same_values(host_as(to_cpu(kg), rd), kr)) << what << ": the cache's keys";
      EXPECT_TRUE(same_values(host_as(to_cpu(vg), rd), vr)) << what << ": the cache's values";
      STRATA_EXPECT_CLOSE(host_as(yg, rd), yr, tol(dt, kTolReduction), what + " y");
      STRATA_EXPECT_CLOSE(host_as(lg, stats(dt)), lr, tol(dt, kTolReduction), what + " lse");
    }
}

}  // namespace
}  // namespace strata::testing
