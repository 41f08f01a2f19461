// Synchronised batch norm (op_args.h: sync) on the cuda backend, whose strata kernels
// exchange the sums between their statistics and apply passes (cuDNN's fused calls cannot:
// f32 NCHW goes to strata's kernels too when synchronised). A fake group of two replicas
// holding the same rows (support/replicas.h: the sums doubled on the GPU by the backend's
// scale op, on its stream) must give batch norm over the doubled batch [x; x] as the
// reference computes it: y, the statistics, the running statistics (whose unbiased variance
// counts 2M rows), dx and dz; each replica's dgamma and dbeta are half the doubled batch's.
// A group of one is plain batch norm bit for bit; graph mode captures the reduction (a
// captured step replays it) and trains bitwise as direct mode does.
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "strata/backends/api/registry.h"
#include "strata/nn/nn.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"
#include "strata/ops/table/relu_mask.h"
#include "support/replicas.h"

namespace strata::testing {
namespace {

STRATA_COVERS(batch_norm_fwd, "cuda_sync");
STRATA_COVERS(batch_norm_bwd, "cuda_sync");

class CudaSyncBatchNorm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_skip_reason().empty()) GTEST_SKIP() << "no usable GPU: " << gpu_skip_reason();
  }
};

// A CPU f32 copy of t (half-precision values are exact in f32), in t's layout.
Tensor f32_copy(const Tensor& t) {
  Tensor o = Tensor::empty(t.sizes(), DType::f32, Device::cpu(), format_of(t));
  copy_into(t, o);
  return o;
}
// [t; t] along the batch, f32 on the CPU.
Tensor twice(const Tensor& t) {
  Shape s = t.sizes();
  s[0] *= 2;
  Tensor o = Tensor::empty(s, DType::f32, Device::cpu(), format_of(t));
  copy_into(t, o.narrow(0, 0, t.size(0)));
  copy_into(t, o.narrow(0, t.size(0), t.size(0)));
  return o;
}
Tensor halved(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  for (double& x : v) x /= 2;
  return Tensor::from_vector(v, t.sizes());
}

struct Case {
  Shape sizes;
  MemoryFormat fmt;
  DType dt;
  bool z, relu;
};

void check_doubled_batch(const Case& cs, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << cs.sizes.str() << " " << dtype_name(cs.dt) << (cs.fmt == kNHWC ? " nhwc" : " nchw")
                                    << (cs.z ? " +z" : "") << (cs.relu ? " relu" : ""));
  const int64_t c = cs.sizes[1];
  const double tol = cs.dt == DType::bf16 ? kTolBf16 : cs.dt == DType::f16 ? kTolF16 : kTolReduction;
  backends::BackendAdapter<CudaBackend> be;
  ReferenceBackend ref;
  const Tensor xh = random_tensor(cs.sizes, cs.dt, seed, -2.0, 3.0, cs.fmt);
  const Tensor zh = random_tensor(cs.sizes, cs.dt, seed + 1, -1.0, 1.0, cs.fmt);
  const Tensor dyh = random_tensor(cs.sizes, cs.dt, seed + 2, -1.0, 1.0, cs.fmt);
  const Pair gamma = rand_pair({c}, seed + 3, kNCHW, 0.5, 1.5), beta = rand_pair({c}, seed + 4);
  Pair rm = rand_pair({c}, seed + 5, kNCHW, -0.5, 0.5), rv = rand_pair({c}, seed + 6, kNCHW, 0.5, 2.0);

  // The reference, plain, on the doubled batch.
  Shape s2 = cs.sizes;
  s2[0] *= 2;
  const Tensor x2 = twice(xh), z2 = twice(zh), dy2 = twice(dyh);
  const Tensor y_ref = cpu_nan(s2, cs.fmt), sm_ref = cpu_nan({c}), si_ref = cpu_nan({c});
  const Tensor mask_ref = Tensor::empty(Shape{ops::relu_mask_bytes(s2.numel())}, DType::u8);
  ops::BatchNormFwdArgs r{x2, gamma.cpu, beta.cpu, rm.cpu, rv.cpu, y_ref, sm_ref, si_ref};
  if (cs.z) r.z = z2;
  r.relu = cs.relu;
  if (cs.relu) r.relu_mask = mask_ref;
  ref.batch_norm_fwd(r);
  const Tensor dx_ref = cpu_nan(s2, cs.fmt), dz_ref = cpu_nan(s2, cs.fmt), dg_ref = cpu_nan({c}),
               db_ref = cpu_nan({c});
  ops::BatchNormBwdArgs rb{x2, dy2, gamma.cpu, sm_ref, si_ref, dx_ref, dg_ref, db_ref};
  if (cs.relu) rb.relu_mask = mask_ref;
  if (cs.relu && cs.z) rb.dz = dz_ref;
  ref.batch_norm_bwd(rb);

  // The cuda backend, synchronised over two replicas holding x.
  IdenticalReplicas two(be, 2);
  const Tensor xg = to_gpu(xh), zg = to_gpu(zh), dyg = to_gpu(dyh);
  const Tensor y = gpu_nan(cs.sizes, cs.fmt, cs.dt), sm = gpu_nan({c}), si = gpu_nan({c});
  const Tensor mask = Tensor::empty(Shape{ops::relu_mask_bytes(cs.sizes.numel())}, DType::u8, Device::cuda());
  ops::BatchNormFwdArgs g{xg, gamma.gpu, beta.gpu, rm.gpu, rv.gpu, y, sm, si};
  if (cs.z) g.z = zg;
  g.relu = cs.relu;
  if (cs.relu) g.relu_mask = mask;
  g.sync = &two;
  be.batch_norm_fwd(g);
  const Tensor dx = gpu_nan(cs.sizes, cs.fmt, cs.dt), dz = gpu_nan(cs.sizes, cs.fmt, cs.dt), dg = gpu_nan({c}),
               db = gpu_nan({c});
  ops::BatchNormBwdArgs gb{xg, dyg, gamma.gpu, sm, si, dx, dg, db};
  if (cs.relu) gb.relu_mask = mask;
  if (cs.relu && cs.z) gb.dz = dz;
  gb.sync = &two;
  be.batch_norm_bwd(gb);

  const int64_t n = cs.sizes[0];
  EXPECT_EQ(two.calls, 2);
  STRATA_EXPECT_CLOSE(f32_copy(y), y_ref.narrow(0, 0, n), tol, "y");
  STRATA_EXPECT_CLOSE(sm, sm_ref, kTolReduction, "save_mean");
  STRATA_EXPECT_CLOSE(si, si_ref, kTolReduction, "save_invstd");
  STRATA_EXPECT_CLOSE(rm.gpu, rm.cpu, kTolReduction, "running_mean");
  STRATA_EXPECT_CLOSE(rv.gpu, rv.cpu, kTolReduction, "running_var (unbiased over 2M rows)");
  STRATA_EXPECT_CLOSE(f32_copy(dx), dx_ref.narrow(0, 0, n), tol, "dx");
  if (cs.relu && cs.z) {
    STRATA_EXPECT_CLOSE(f32_copy(dz), dz_ref.narrow(0, 0, n), tol, "dz");
  }
  STRATA_EXPECT_CLOSE(dg, halved(dg_ref), kTolReduction, "dgamma (this replica's: half)");
  STRATA_EXPECT_CLOSE(db, halved(db_ref), kTolReduction, "dbeta (this replica's: half)");
}

// f32 NCHW (cuDNN's layout when not synchronised) and channels-last, f16/bf16 activations,
// odd sizes (scalar kernels), C % 8 == 0 (vectors), batch 1, [N,C], every fusion.
TEST_F(CudaSyncBatchNorm, TwoIdenticalReplicasAreTheDoubledBatch) {
  uint64_t seed = 3000;
  const std::vector<Case> cases = {
      {{2, 16, 8, 8}, kNCHW, DType::f32, false, false},  {{3, 5, 7, 3}, kNCHW, DType::f32, false, false},
      {{4, 16, 7, 5}, kNHWC, DType::f32, false, false},  {{1, 24, 3, 3}, kNHWC, DType::f32, false, true},
      {{2, 16, 8, 8}, kNCHW, DType::f32, true, true},    {{3, 10, 6, 5}, kNHWC, DType::f32, true, true},
      {{2, 16, 7, 5}, kNHWC, DType::bf16, true, true},   {{2, 8, 6, 6}, kNCHW, DType::f16, false, true},
      {{4, 16, 4, 4}, kNHWC, DType::bf16, false, false}, {{3, 6}, kNCHW, DType::f32, false, false},
  };
  for (const Case& cs : cases) check_doubled_batch(cs, seed += 10);
}

// Through the front end: a group of one is the plain batch norm (cuDNN's, on f32 NCHW).
TEST_F(CudaSyncBatchNorm, GroupOfOneIsPlainBatchNormBitwise) {
  backends::BackendAdapter<CudaBackend> be;
  const ops::VirtualDispatch d(be);
  for (MemoryFormat fmt : {kNCHW, kNHWC}) {
    const Tensor x = to_gpu(random_tensor({4, 16, 6, 6}, DType::f32, 41, -2.0, 3.0, fmt));
    const Tensor dy = to_gpu(random_tensor({4, 16, 6, 6}, DType::f32, 42, -1.0, 1.0, fmt));
    const Pair gamma = rand_pair({16}, 43, kNCHW, 0.5, 1.5), beta = rand_pair({16}, 44);
    CountingGroup one(1);
    auto step = [&](ops::ChannelSumReducer* sync) {
      const Tensor rm = to_gpu(random_tensor({16}, DType::f32, 45)), rv = to_gpu(random_tensor({16}, DType::f32, 46, 0.5, 2.0));
      const ops::BatchNormOut o =
          ops::batch_norm(d, x, gamma.gpu, beta.gpu, rm, rv, true, 0.1, 1e-5, Tensor(), true, sync);
      const ops::BatchNormGrads g =
          ops::batch_norm_bwd(d, x, dy, gamma.gpu, o.save_mean, o.save_invstd, true, o.relu_mask, false, sync);
      std::vector<Tensor> out;
      for (const Tensor& t : {o.y, o.save_mean, o.save_invstd, rm, rv, g.dx, g.dgamma, g.dbeta}) out.push_back(to_cpu(t));
      return out;
    };
    const std::vector<Tensor> plain = step(nullptr), synced = step(&one);
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(bitwise_equal(synced[i], plain[i])) << "output " << i;
    EXPECT_EQ(one.calls, 0);
  }
}

struct Steps {
  std::vector<Tensor> losses;
  nn::StateDict state;
};

// Four training steps of a ResNet-18 whose batch norms synchronise over two identical
// replicas (on the registry's cuda backend, whose stream the model's work is on).
Steps train_synced(ops::DispatchMode mode, const nn::ModelOptions& o, int& calls) {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.init.seed = 3;
  auto m = nn::make_resnet(c, mode, "cuda", o);
  IdenticalReplicas two(backends::registry().get("cuda"), 2);
  EXPECT_EQ(nn::convert_sync_batch_norm(m->module(), &two), 20);
  nn::OptimizerConfig oc;
  oc.lr = 0.05;
  oc.momentum = 0.9;
  auto opt = m->make_optimizer(oc);
  Steps s;
  for (int i = 0; i < 4; ++i) {
    const Tensor x = random_tensor({2, 3, 32, 32}, DType::f32, 200 + i);
    const Tensor y = Tensor::from_vector(std::vector<int64_t>{i % 10, (i + 3) % 10}, Shape{2});
    const nn::StepResult r = m->train_step(x, y, *opt);
    s.losses.push_back(to_cpu(r.loss));
  }
  for (const auto& [name, t] : m->state_dict()) s.state.emplace_back(name, t.device().is_cuda() ? to_cpu(t) : t.clone());
  calls = two.calls;
  return s;
}

// The reduction is enqueued on the stream without a host wait: graph mode captures it, and
// its replays (no further calls) give direct mode's bits, which calls it every step.
TEST_F(CudaSyncBatchNorm, GraphModeCapturesTheReduction) {
  for (bool bf16_nhwc : {false, true}) {
    SCOPED_TRACE(bf16_nhwc ? "bf16 channels-last" : "f32 NCHW");
    nn::ModelOptions o;
    if (bf16_nhwc) {
      o.compute_dtype = DType::bf16;
      o.memory_format = MemoryFormat::channels_last;
    }
    int direct_calls = 0, graph_calls = 0;
    const Steps direct = train_synced(ops::DispatchMode::direct, o, direct_calls);
    const Steps graph = train_synced(ops::DispatchMode::graph, o, graph_calls);
    EXPECT_EQ(direct_calls, 4 * 2 * 20) << "two reductions per batch norm and step";
    EXPECT_LT(graph_calls, direct_calls) << "replays call nothing on the host";
    ASSERT_EQ(direct.losses.size(), graph.losses.size());
    for (size_t i = 0; i < direct.losses.size(); ++i)
      EXPECT_TRUE(bitwise_equal(direct.losses[i], graph.losses[i])) << "loss " << i;
    for (size_t i = 0; i < direct.state.size(); ++i)
      EXPECT_TRUE(bitwise_equal(direct.state[i].second, graph.state[i].second)) << direct.state[i].first;
  }
}

}  // namespace
}  // namespace strata::testing
