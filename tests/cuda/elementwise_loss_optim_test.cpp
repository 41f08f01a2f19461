// Element-wise ops, dropout, losses, reductions, fill, copy and the fused optimizer
// steps on the cuda backend against the reference.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "strata/backends/api/registry.h"
#include "support/expect_error.h"
#include "support/optimizer_lists.h"

namespace strata::testing {
namespace {

STRATA_COVERS(add, "cuda_vs_reference");
STRATA_COVERS(scale, "cuda_vs_reference");
STRATA_COVERS(axpy, "cuda_vs_reference");
STRATA_COVERS(dropout_fwd, "cuda_vs_reference");
STRATA_COVERS(dropout_bwd, "cuda_vs_reference");
STRATA_COVERS(softmax_xent_fwd, "cuda_vs_reference");
STRATA_COVERS(softmax_xent_bwd, "cuda_vs_reference");
STRATA_COVERS(bce_logits_fwd, "cuda_vs_reference");
STRATA_COVERS(bce_logits_bwd, "cuda_vs_reference");
STRATA_COVERS(sum, "cuda_vs_reference");
STRATA_COVERS(mean, "cuda_vs_reference");
STRATA_COVERS(argmax, "cuda_vs_reference");
STRATA_COVERS(fill, "cuda_vs_reference");
STRATA_COVERS(copy, "cuda_vs_reference");
STRATA_COVERS(sgd_step, "cuda_vs_reference");
STRATA_COVERS(adam_step, "cuda_vs_reference");
STRATA_COVERS(multi_sgd_step, "cuda_vs_reference");
STRATA_COVERS(multi_adam_step, "cuda_vs_reference");
STRATA_COVERS(amp_update_scale, "cuda_vs_reference");

class CudaElementwise : public CudaTest {};

TEST_F(CudaElementwise, AddScaleAxpy) {
  struct Case {
    Shape s;
    MemoryFormat fmt;
    bool slice;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 5, 7}, kNCHW, false},
                                         {{2, 8, 5, 3}, kNHWC, false},
                                         {{1000003}, kNCHW, false},
                                         {{2, 4, 3, 3}, kNCHW, true},
                                         {{}, kNCHW, false}}) {
    SCOPED_TRACE(c.s.str() + (c.slice ? " slice" : ""));
    auto in = [&](uint64_t seed) { return c.slice ? rand_slice_pair(c.s, seed, c.fmt) : rand_pair(c.s, seed, c.fmt); };
    const Pair a = in(1), b = in(2);
    const Pair y = c.slice ? nan_pair(c.s, c.fmt, true) : nan_pair(c.s, c.fmt);
    be().add({a.gpu, b.gpu, y.gpu});
    ref_.add({a.cpu, b.cpu, y.cpu});
    EXPECT_TRUE(close(y.gpu, y.cpu, 0.0)) << "add";
    be().scale({a.gpu, y.gpu, -1.7});
    ref_.scale({a.cpu, y.cpu, -1.7});
    EXPECT_TRUE(close(y.gpu, y.cpu, 0.0)) << "scale";
    be().axpy({b.gpu, y.gpu, 0.3});
    ref_.axpy({b.cpu, y.cpu, 0.3});
    STRATA_EXPECT_CLOSE(y.gpu, y.cpu, kTolElementwise, "axpy");
  }
  // In place: y = a + y.
  const Pair a = rand_pair({17, 3}, 5), y = rand_pair({17, 3}, 6);
  be().add({a.gpu, y.gpu, y.gpu});
  ref_.add({a.cpu, y.cpu, y.cpu});
  EXPECT_TRUE(close(y.gpu, y.cpu, 0.0)) << "add in place";
}

TEST_F(CudaElementwise, HalfAndDoubleElementwise) {
  for (DType dt : {DType::f16, DType::bf16, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    ASSERT_TRUE(be().capabilities().supports(ops::OpId::add, dt));
    const Tensor a = random_tensor({3, 50}, dt, 11), b = random_tensor({3, 50}, dt, 12);
    const Tensor y = gpu_nan({3, 50}, kNCHW, dt);
    be().add({to_gpu(a), to_gpu(b), y});
    // Expected: the sum in f32 (f64 for f64) rounded once to dt, as core's conversion.
    const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
    Tensor want = Tensor::empty({3, 50}, dt);
    std::vector<double> sum(av.size());
    for (size_t i = 0; i < av.size(); ++i)
      sum[i] = dt == DType::f64 ? av[i] + bv[i] : static_cast<double>(static_cast<float>(av[i]) + static_cast<float>(bv[i]));
    copy_into(Tensor::from_vector(sum, {3, 50}), want);
    EXPECT_TRUE(bitwise_equal(to_cpu(y), want));
  }
}

TEST_F(CudaElementwise, Fill) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    ASSERT_TRUE(be().capabilities().supports(ops::OpId::fill, dt));
    const Tensor g = Tensor::empty({5, 7}, dt, Device::cuda());
    be().fill({g, 3.0});
    for (double v : to_cpu(g).to_vector<double>()) ASSERT_EQ(v, 3.0);
  }
  const Pair y = nan_pair({2, 4, 3, 3}, kNCHW, true);  // a strided slice: only it is written
  be().fill({y.gpu, -0.25});
  ref_.fill({y.cpu, -0.25});
  EXPECT_TRUE(close(y.gpu, y.cpu, 0.0));
}

// The mask is drawn from the same counter-based hash as on the CPU: bitwise equal.
TEST_F(CudaElementwise, DropoutMatchesTheCpuMaskExactly) {
  for (MemoryFormat fmt : {kNCHW, kNHWC}) {
    const Shape s{4, 6, 5, 3};
    const Pair x = rand_pair(s, 21, fmt);
    const Pair y = nan_pair(s, fmt);
    const Tensor mg = Tensor::empty(s, DType::u8, Device::cuda(), fmt);
    const Tensor mc = Tensor::empty(s, DType::u8, Device::cpu(), fmt);
    be().dropout_fwd({x.gpu, y.gpu, mg, 0.3, 1234, 99});
    ref_.dropout_fwd({x.cpu, y.cpu, mc, 0.3, 1234, 99});
    EXPECT_TRUE(bitwise_equal(to_cpu(mg), mc)) << "mask";
    EXPECT_TRUE(close(y.gpu, y.cpu, 0.0)) << "dropout_fwd";
    const Pair dy = rand_pair(s, 22, fmt), dx = nan_pair(s, fmt);
    be().dropout_bwd({dy.gpu, mg, dx.gpu, 0.3});
    ref_.dropout_bwd({dy.cpu, mc, dx.cpu, 0.3});
    EXPECT_TRUE(close(dx.gpu, dx.cpu, 0.0)) << "dropout_bwd";
  }
}

// Rows labelled ignore_index (every `every`-th, none when 0) leave the mean and get a zero
// gradient; `strided`: the logits a column slice of a wider tensor. The saved state is the
// [N] log-sum-exp, and the backward recomputes the softmax from it and the logits.
TEST_F(CudaElementwise, SoftmaxCrossEntropy) {
  struct Case {
    int64_t n, c, every;
    bool strided;
  };
  for (const Case& k : std::vector<Case>{
           {1, 10, 0, false}, {64, 10, 3, false}, {33, 1000, 4, true}, {3, 2, 2, false}, {5, 50257, 2, true}}) {
    SCOPED_TRACE(::testing::Message() << "N" << k.n << " C" << k.c << " every " << k.every
                                      << (k.strided ? " strided" : ""));
    Pair logits = rand_pair({k.n, k.c + (k.strided ? 5 : 0)}, 31, kNCHW, -5.0, 5.0);
    if (k.strided) logits = {logits.cpu.narrow(1, 3, k.c), logits.gpu.narrow(1, 3, k.c)};
    const Tensor labels_c = k.every ? labels_with_ignored(k.n, k.c, 32, k.every) : random_labels(k.n, k.c, 32);
    const Tensor labels_g = to_gpu(labels_c);
    const Pair loss = nan_pair({}), lse = nan_pair({k.n});
    be().softmax_xent_fwd({logits.gpu, labels_g, loss.gpu, lse.gpu});
    ref_.softmax_xent_fwd({logits.cpu, labels_c, loss.cpu, lse.cpu});
    STRATA_EXPECT_CLOSE(loss.gpu, loss.cpu, kTolReduction, "softmax_xent_fwd loss");
    STRATA_EXPECT_CLOSE(lse.gpu, lse.cpu, kTolReduction, "softmax_xent_fwd lse");
    const Pair dloss = rand_pair({}, 33, kNCHW, 0.5, 2.0), dx = nan_pair({k.n, k.c});
    be().softmax_xent_bwd({logits.gpu, lse.gpu, labels_g, dloss.gpu, dx.gpu});
    ref_.softmax_xent_bwd({logits.cpu, lse.cpu, labels_c, dloss.cpu, dx.cpu});
    STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, kTolReduction, "softmax_xent_bwd");
  }
}

// GPT's layout (nn::GptConfig::vocab_multiple): logits and dlogits the first V (odd) columns of
// rows of round_up(V, 64). The classes past V never enter, and the backward writes only the
// view's elements: the padding's NaN stays.
TEST_F(CudaElementwise, SoftmaxCrossEntropyOnRowsOfAPaddedStride) {
  for (const int64_t v : {int64_t{11}, int64_t{50257}}) {
    SCOPED_TRACE(::testing::Message() << "V " << v);
    const int64_t n = 7, vp = (v + 63) / 64 * 64;
    const Pair rows = rand_pair({n, vp}, 38, kNCHW, -5.0, 5.0);
    const Pair logits{rows.cpu.narrow(1, 0, v), rows.gpu.narrow(1, 0, v)};
    const Tensor labels_c = labels_with_ignored(n, v, 39, 3), labels_g = to_gpu(labels_c);
    const Pair loss = nan_pair({}), lse = nan_pair({n});
    be().softmax_xent_fwd({logits.gpu, labels_g, loss.gpu, lse.gpu});
    ref_.softmax_xent_fwd({logits.cpu, labels_c, loss.cpu, lse.cpu});
    STRATA_EXPECT_CLOSE(loss.gpu, loss.cpu, kTolReduction, "softmax_xent_fwd loss");
    STRATA_EXPECT_CLOSE(lse.gpu, lse.cpu, kTolReduction, "softmax_xent_fwd lse");
    const Pair dloss = rand_pair({}, 40, kNCHW, 0.5, 2.0), d_rows = nan_pair({n, vp});
    const Pair dx{d_rows.cpu.narrow(1, 0, v), d_rows.gpu.narrow(1, 0, v)};
    be().softmax_xent_bwd({logits.gpu, lse.gpu, labels_g, dloss.gpu, dx.gpu});
    ref_.softmax_xent_bwd({logits.cpu, lse.cpu, labels_c, dloss.cpu, dx.cpu});
    STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, kTolReduction, "softmax_xent_bwd");
    for (float p : to_cpu(d_rows.gpu).narrow(1, v, vp - v).contiguous().to_vector<float>())
      ASSERT_TRUE(std::isnan(p)) << "the padding was written";
  }
}

// Mixed-precision training hands the loss the network's f16/bf16 logits as they are (Model's
// loss_input): the loss and lse (f32) must be bitwise those of the logits' f32 cast, and
// dlogits that gradient rounded to the logits' dtype, whichever loads a row takes (16-byte
// vectors on aligned contiguous rows, element loads on strided or misaligned ones: an f32 row
// may take one path and its half copy the other).
TEST_F(CudaElementwise, SoftmaxCrossEntropyOnHalfLogitsIsTheF32CastsBits) {
  struct Case {
    int64_t n, c, pad, offset;  // rows of c + pad columns, the logits starting `offset` columns in
    bool transposed;            // logits [n, c] as the transpose of a [c, n] tensor: column stride n
  };
  for (const DType dt : {DType::bf16, DType::f16})
    for (const Case& k : std::vector<Case>{{16, 50257, 47, 0, false},
                                           {5, 50304, 0, 0, false},
                                           {3, 11, 0, 0, false},
                                           {7, 1000, 9, 1, false},
                                           {4, 37, 0, 0, true},
                                           {1, 8, 0, 0, false}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " N" << k.n << " C" << k.c << " pad " << k.pad
                                        << " offset " << k.offset << (k.transposed ? " transposed" : ""));
      // Logits exact in dt: random f32 rounded to dt, and those values in f32.
      const Tensor src = random_tensor(k.transposed ? Shape{k.c, k.n} : Shape{k.n, k.c + k.pad + k.offset},
                                       DType::f32, 41, -6.0, 6.0, kNCHW);
      const Tensor half_full = to_gpu(host_as(src, dt));
      const Tensor f32_full = to_gpu(host_as(half_full, DType::f32));
      const auto view = [&](const Tensor& t) {
        return k.transposed ? t.permute({1, 0}) : t.narrow(1, k.offset, k.c);
      };
      const Tensor xh = view(half_full), xf = view(f32_full);
      // Every third row ignored (one row: none, or the loss would be 0/0).
      const Tensor labels = to_gpu(k.n > 1 ? labels_with_ignored(k.n, k.c, 42, 3) : random_labels(k.n, k.c, 42));
      const Tensor loss_h = gpu_nan({}), lse_h = gpu_nan({k.n}), loss_f = gpu_nan({}), lse_f = gpu_nan({k.n});
      be().softmax_xent_fwd({xh, labels, loss_h, lse_h});
      be().softmax_xent_fwd({xf, labels, loss_f, lse_f});
      EXPECT_TRUE(same_values(loss_h, loss_f)) << "loss";
      EXPECT_TRUE(same_values(lse_h, lse_f)) << "lse";
      const Tensor dloss = to_gpu(cpu_scalar(1.25));
      const Tensor dh = gpu_nan({k.n, k.c}, kNCHW, dt), df = gpu_nan({k.n, k.c});
      be().softmax_xent_bwd({xh, lse_h, labels, dloss, dh});
      be().softmax_xent_bwd({xf, lse_f, labels, dloss, df});
      EXPECT_TRUE(same_values(dh, to_gpu(host_as(df, dt)))) << "dlogits";
      // And against the reference, for the values themselves.
      const Tensor loss_r = cpu_nan({});
      ref_.softmax_xent_fwd({host_as(xf, DType::f32), to_cpu(labels), loss_r, cpu_nan({k.n})});
      STRATA_EXPECT_CLOSE(loss_h, loss_r, kTolReduction, "loss against the reference");
    }
}

// Every row ignored: the loss is 0/0 = NaN (PyTorch 2.x's answer) and the gradient zero.
TEST_F(CudaElementwise, SoftmaxCrossEntropyAllIgnored) {
  const Pair logits = rand_pair({4, 7}, 34);
  const Tensor labels = to_gpu(labels_with_ignored(4, 7, 35, 1, 3));
  const Tensor loss = gpu_nan({}), lse = gpu_nan({4}), dloss = to_gpu(cpu_scalar(1.0)), dx = gpu_nan({4, 7});
  be().softmax_xent_fwd({logits.gpu, labels, loss, lse, 3});
  be().softmax_xent_bwd({logits.gpu, lse, labels, dloss, dx, 3});
  EXPECT_TRUE(std::isnan(to_cpu(loss).item()));
  for (float v : to_cpu(dx).to_vector<float>()) ASSERT_EQ(v, 0.0f);
}

// A label neither a class nor ignore_index is found on the device and raised by name, with its
// position and value, as the CPU backends raise it, at the host's next look (index_errors.h): a
// synchronisation, a copy to the host, or a later forward once the device has run the bad one;
// raised once.
TEST_F(CudaElementwise, SoftmaxCrossEntropyBadLabelIsAnError) {
  const Pair logits = rand_pair({5, 10}, 36);
  Tensor labels_c = labels_with_ignored(5, 10, 37, 2);
  labels_c.data<int64_t>()[3] = 10;
  const Tensor bad = to_gpu(labels_c), good = to_gpu(labels_with_ignored(5, 10, 37, 2));
  const Tensor loss = gpu_nan({}), lse = gpu_nan({5});
  const auto expect_raised = [](auto&& look, const char* where) {
    SCOPED_TRACE(where);
    EXPECT_STRATA_ERROR(look(), "softmax_xent_fwd", "labels[3] = 10", "[0, 10)", "ignore_index (-100)");
  };
  EXPECT_NO_THROW(be().softmax_xent_fwd({logits.gpu, bad, loss, lse}));
  expect_raised([&] { be().synchronize(); }, "synchronize");
  EXPECT_NO_THROW(be().synchronize()) << "raised a second time";
  be().softmax_xent_fwd({logits.gpu, bad, loss, lse});
  expect_raised([&] { (void)to_cpu(loss); }, "reading the loss");
  be().softmax_xent_fwd({logits.gpu, bad, loss, lse});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_raised([&] { be().softmax_xent_fwd({logits.gpu, good, loss, lse}); }, "the next forward");
  be().softmax_xent_fwd({logits.gpu, good, loss, lse});
  EXPECT_FALSE(std::isnan(to_cpu(loss).item())) << "good labels after a raised bad one";
}

TEST_F(CudaElementwise, BceWithLogits) {
  const Shape s{16, 20};  // 20-class multi-label, as PASCAL VOC
  const Pair x = rand_pair(s, 41, kNCHW, -8.0, 8.0);
  const Pair t = rand_pair(s, 42, kNCHW, 0.0, 1.0);
  const Pair loss = nan_pair({});
  be().bce_logits_fwd({x.gpu, t.gpu, loss.gpu});
  ref_.bce_logits_fwd({x.cpu, t.cpu, loss.cpu});
  STRATA_EXPECT_CLOSE(loss.gpu, loss.cpu, kTolReduction, "bce_logits_fwd");
  const Pair dloss = rand_pair({}, 43, kNCHW, 0.5, 2.0), dx = nan_pair(s);
  be().bce_logits_bwd({x.gpu, t.gpu, dloss.gpu, dx.gpu});
  ref_.bce_logits_bwd({x.cpu, t.cpu, dloss.cpu, dx.cpu});
  STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, kTolReduction, "bce_logits_bwd");
}

TEST_F(CudaElementwise, Reductions) {
  for (const Shape& s : {Shape{7}, Shape{2, 3, 5, 7}, Shape{3000017}, Shape{}}) {
    SCOPED_TRACE(s.str());
    const Pair x = rand_pair(s, 51);
    const Pair y = nan_pair({});
    be().sum({x.gpu, y.gpu});
    ref_.sum({x.cpu, y.cpu});
    STRATA_EXPECT_CLOSE(y.gpu, y.cpu, kTolReduction, "sum");
    be().mean({x.gpu, y.gpu});
    ref_.mean({x.cpu, y.cpu});
    STRATA_EXPECT_CLOSE(y.gpu, y.cpu, kTolReduction, "mean");
  }
  const Pair xs = rand_slice_pair({2, 4, 3, 3}, 52, kNHWC), y = nan_pair({});
  be().sum({xs.gpu, y.gpu});
  ref_.sum({xs.cpu, y.cpu});
  STRATA_EXPECT_CLOSE(y.gpu, y.cpu, kTolReduction, "sum of a strided view");
}

TEST_F(CudaElementwise, Argmax) {
  for (auto [n, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 10}, {64, 1000}, {3, 33}}) {
    SCOPED_TRACE(::testing::Message() << "N" << n << " C" << c);
    const Pair x = rand_pair({n, c}, 61);
    const Tensor yg = Tensor::empty({n}, DType::i64, Device::cuda()), yc = Tensor::empty({n}, DType::i64);
    be().argmax({x.gpu, yg});
    ref_.argmax({x.cpu, yc});
    EXPECT_TRUE(bitwise_equal(to_cpu(yg), yc));
  }
  // Ties: the first maximum wins; NaN beats everything (first NaN wins).
  const Tensor t = Tensor::from_vector<float>({1, 3, 3, 2, 5, 5, 5, 0, 1, NAN, 7, NAN}, {3, 4});
  const Tensor yg = Tensor::empty({3}, DType::i64, Device::cuda());
  be().argmax({to_gpu(t), yg});
  EXPECT_EQ(to_cpu(yg).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
}

TEST_F(CudaElementwise, CopyOp) {
  // The op-table copy on device views: dtype conversion and layout change in one kernel.
  const Tensor x = random_tensor({2, 5, 4, 3}, DType::f32, 71, 0, 100);  // non-negative: u8 casts
  const Tensor xg = to_gpu(x);
  for (DType dt : {DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::u8}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Tensor yg = Tensor::empty(x.sizes(), dt, Device::cuda(), kNHWC);
    const Tensor yc = Tensor::empty(x.sizes(), dt, Device::cpu(), kNHWC);
    be().copy({xg, yg});
    ref_.copy({x, yc});
    EXPECT_TRUE(bitwise_equal(to_cpu(yg), yc));
  }
  // Across devices through the op as well.
  const Tensor back = Tensor::empty(x.sizes());
  be().copy({xg, back});
  EXPECT_TRUE(bitwise_equal(back, x));
}

TEST_F(CudaElementwise, SgdStep) {
  struct Case {
    double momentum, wd;
    bool nesterov;
  };
  for (const Case& c : std::vector<Case>{{0.0, 0.0, false}, {0.9, 1e-4, false}, {0.9, 5e-4, true}}) {
    SCOPED_TRACE(::testing::Message() << "momentum " << c.momentum << (c.nesterov ? " nesterov" : ""));
    const Shape s{64, 3, 3, 3};
    Pair p = rand_pair(s, 81), buf = rand_pair(s, 82, kNCHW, -0.1, 0.1);
    for (int step = 0; step < 3; ++step) {
      const Pair g = rand_pair(s, 83 + step);
      ops::SgdStepArgs ag{p.gpu, g.gpu, c.momentum != 0 ? buf.gpu : Tensor(), {0.1, c.momentum, c.wd, c.nesterov}};
      ops::SgdStepArgs ac{p.cpu, g.cpu, c.momentum != 0 ? buf.cpu : Tensor(), {0.1, c.momentum, c.wd, c.nesterov}};
      // Graph mode's form from the second step on: lr read from device memory, o.lr a decoy.
      const Tensor hyper = to_gpu(Tensor::from_vector<double>({0.1, 0.0}, Shape{2}));
      if (step > 0) ag.hyper = hyper, ag.o.lr = 123.0;
      be().sgd_step(ag);
      ref_.sgd_step(ac);
    }
    STRATA_EXPECT_CLOSE(p.gpu, p.cpu, kTolReduction, "sgd param");
    if (c.momentum != 0) {
      STRATA_EXPECT_CLOSE(buf.gpu, buf.cpu, kTolReduction, "sgd momentum_buf");
    }
  }
}

// The multi-tensor kernels (several launches, strided tensors on the single kernel)
// against the single kernels, which are checked against the reference above: bitwise.
TEST_F(CudaElementwise, MultiTensorStepsMatchSingleSteps) {
  expect_multi_steps_match_single_steps(backends::registry().get("cuda"), [](const Tensor& t) { return to_gpu(t); });
  // And a list against the reference's single steps.
  const std::vector<Pair> p{rand_pair({3, 33}, 301), rand_pair({2, 8, 3, 3}, 302, kNHWC)};
  const std::vector<Pair> g{rand_pair({3, 33}, 303), rand_pair({2, 8, 3, 3}, 304, kNHWC)};
  const std::vector<Pair> m{rand_pair({3, 33}, 305), rand_pair({2, 8, 3, 3}, 306, kNHWC)};
  const std::vector<Pair> v{rand_pair({3, 33}, 307, kNCHW, 0.0, 0.01), rand_pair({2, 8, 3, 3}, 308, kNHWC, 0.0, 0.01)};
  const auto gpu = [](const std::vector<Pair>& ps) {
    std::vector<ops::TensorView> out;
    for (const Pair& x : ps) out.emplace_back(x.gpu);
    return out;
  };
  const std::vector<ops::TensorView> pv = gpu(p), gv = gpu(g), mv = gpu(m), vv = gpu(v);
  const std::vector<int64_t> steps{1, 4};
  const ops::AdamOptions ao{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
  be().multi_adam_step({pv, gv, mv, vv, {}, steps, ao});
  for (size_t i = 0; i < p.size(); ++i) ref_.adam_step({p[i].cpu, g[i].cpu, m[i].cpu, v[i].cpu, ao, steps[i]});
  ops::SgdOptions so;
  so.lr = 0.05, so.momentum = 0.9, so.weight_decay = 1e-2;
  be().multi_sgd_step({pv, gv, mv, {}, so});
  for (size_t i = 0; i < p.size(); ++i) ref_.sgd_step({p[i].cpu, g[i].cpu, m[i].cpu, so});
  for (size_t i = 0; i < p.size(); ++i) {
    STRATA_EXPECT_CLOSE(p[i].gpu, p[i].cpu, kTolReduction, "params[" + std::to_string(i) + "]");
    STRATA_EXPECT_CLOSE(m[i].gpu, m[i].cpu, kTolReduction, "exp_avgs / momentum_bufs[" + std::to_string(i) + "]");
    STRATA_EXPECT_CLOSE(v[i].gpu, v[i].cpu, kTolReduction, "exp_avg_sqs[" + std::to_string(i) + "]");
  }
}

// A step's hypers in host memory are copied by the call: from pinned memory only (the
// device reads it after the call returns), and as rows of one tensor (one copy).
TEST_F(CudaElementwise, HostHypersMustBePinnedRowsOfOneTensor) {
  const Pair p = rand_pair({8}, 91), g = rand_pair({8}, 92);
  const Tensor pageable = Tensor::from_vector<double>({0.1, 1.0}, Shape{2});
  EXPECT_STRATA_ERROR(be().sgd_step(ops::SgdStepArgs{p.gpu, g.gpu, Tensor(), {}, pageable}), "sgd_step",
                      "must be pinned");
  auto pinned_pair = [] {
    const Tensor t = Tensor::empty_pinned(Shape{512}, DType::f64).narrow(0, 0, 2);  // 4 KiB each
    t.data<double>()[0] = 0.1, t.data<double>()[1] = 1.0;
    return t;
  };
  const Tensor a = pinned_pair(), b = pinned_pair();  // two allocations of a bin each, far apart
  const std::vector<ops::TensorView> ps{p.gpu, p.gpu}, gs{g.gpu, g.gpu}, hs{a, b};
  EXPECT_STRATA_ERROR(be().multi_sgd_step(ops::MultiSgdStepArgs{ps, gs, {}, hs, {}, {}}), "multi_sgd_step",
                      "rows of one tensor");
}

TEST_F(CudaElementwise, AdamStep) {
  for (bool adamw : {false, true}) {
    SCOPED_TRACE(adamw ? "adamw" : "adam");
    const Shape s{1000, 10};
    Pair p = rand_pair(s, 91), m = rand_pair(s, 92, kNCHW, -0.01, 0.01), v = rand_pair(s, 93, kNCHW, 0.0, 0.01);
    for (int64_t step = 1; step <= 3; ++step) {
      const Pair g = rand_pair(s, 94 + step);
      ops::AdamStepArgs ag{p.gpu, g.gpu, m.gpu, v.gpu, {1e-3, 0.9, 0.999, 1e-8, 1e-2, adamw}, step};
      ops::AdamStepArgs ac{p.cpu, g.cpu, m.cpu, v.cpu, {1e-3, 0.9, 0.999, 1e-8, 1e-2, adamw}, step};
      // Graph mode's form from the second step on: lr and step read from device memory.
      const Tensor hyper = to_gpu(Tensor::from_vector<double>({1e-3, static_cast<double>(step)}, Shape{2}));
      if (step > 1) ag.hyper = hyper, ag.o.lr = 123.0, ag.step = 77;
      be().adam_step(ag);
      ref_.adam_step(ac);
    }
    STRATA_EXPECT_CLOSE(p.gpu, p.cpu, kTolReduction, "adam param");
    STRATA_EXPECT_CLOSE(m.gpu, m.cpu, kTolReduction, "adam exp_avg");
    STRATA_EXPECT_CLOSE(v.gpu, v.cpu, kTolReduction, "adam exp_avg_sq");
  }
}

// Dynamic loss scaling decided on the device: the state's updates as the reference's
// over finite, non-finite and growing steps; SGD and Adam reading it (1/scale, skips,
// Adam's count less the skips) as the reference does with the same state.
TEST_F(CudaElementwise, AmpUpdateScaleAndTheStepsThatReadIt) {
  const Tensor state_c = Tensor::from_vector<double>({8.0, 0.0, 3.0, 0.0}, Shape{4});
  const Tensor state_g = to_gpu(state_c);
  const float inf = std::numeric_limits<float>::infinity();
  const Shape s{300, 7};
  Pair p = rand_pair(s, 101), buf = rand_pair(s, 102, kNCHW, -0.1, 0.1);
  Pair q = rand_pair(s, 103), m = rand_pair(s, 104, kNCHW, -0.01, 0.01), v = rand_pair(s, 105, kNCHW, 0.0, 0.01);
  int64_t attempts = 3;  // Adam's count as the optimizer passes it: attempts plus the skips before the first
  for (float last : {1.f, 2.f, inf, 3.f, -inf, 4.f}) {
    SCOPED_TRACE(last);
    const Tensor sums_c = Tensor::from_vector<float>({0.5f, -2.f, last}, Shape{3});
    be().amp_update_scale({to_gpu(sums_c), state_g, 2.0, 0.5, 2});
    ref_.amp_update_scale({sums_c, state_c, 2.0, 0.5, 2});
    EXPECT_TRUE(bitwise_equal(to_cpu(state_g), state_c)) << "state";
    const Pair g = rand_pair(s, 110 + static_cast<uint64_t>(attempts), kNCHW, -100, 100);
    ops::SgdStepArgs ag{p.gpu, g.gpu, buf.gpu, {0.1, 0.9, 1e-4, false}}, ac{p.cpu, g.cpu, buf.cpu, {0.1, 0.9, 1e-4, false}};
    ag.amp = state_g, ac.amp = state_c;
    be().sgd_step(ag);
    ref_.sgd_step(ac);
    ++attempts;
    ops::AdamStepArgs bg{q.gpu, g.gpu, m.gpu, v.gpu, {1e-3, 0.9, 0.999, 1e-8, 1e-2, true}, attempts};
    ops::AdamStepArgs bc{q.cpu, g.cpu, m.cpu, v.cpu, {1e-3, 0.9, 0.999, 1e-8, 1e-2, true}, attempts};
    bg.amp = state_g, bc.amp = state_c;
    be().adam_step(bg);
    ref_.adam_step(bc);
  }
  EXPECT_EQ(state_c.to_vector<double>()[ops::kAmpSkipped], 5.0);  // 3 before, 2 here
  STRATA_EXPECT_CLOSE(p.gpu, p.cpu, kTolReduction, "sgd param");
  STRATA_EXPECT_CLOSE(buf.gpu, buf.cpu, kTolReduction, "sgd momentum_buf");
  STRATA_EXPECT_CLOSE(q.gpu, q.cpu, kTolReduction, "adam param");
  STRATA_EXPECT_CLOSE(m.gpu, m.cpu, kTolReduction, "adam exp_avg");
}

}  // namespace
}  // namespace strata::testing
