// Synchronised batch norm (op_args.h: sync) on every CPU backend. The ranks of an
// in-process world (support/replicas.h), each a thread running its own backend object on
// its own rows of a batch, must compute batch norm over the whole batch, as the reference
// backend computes it in one call: each rank's y, saved statistics, running statistics, dx
// and residual gradient, and the ranks' dgamma and dbeta summed. Odd sizes, uneven shares,
// one row per rank, NCHW and channels-last, with and without the fused residual and ReLU.
// Tolerances: 1e-12 in f64 on the reference (the synchronised variance is E[x^2] - mean^2
// in double, the plain one two-pass); kTolReduction (1e-5) in f32. A group of one replica
// is plain batch norm bit for bit, and its reducer is never called. Also: the gradient of
// the synchronised batch norm by finite differences in f64 through two ranks. (The
// refusals: tests/ops/op_errors_test.cpp.)
#include <numeric>
#include <string>
#include <vector>

#include "cpu_backend_test_util.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"
#include "strata/ops/table/relu_mask.h"
#include "support/op_fixtures.h"
#include "support/replicas.h"

namespace strata::testing {
namespace {

STRATA_COVERS(batch_norm_fwd, "sync");
STRATA_COVERS(batch_norm_bwd, "sync");

// A fresh object of the CPU backend `name` (the reference too), or null when not built.
std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "reference") return std::make_unique<backends::BackendAdapter<ReferenceBackend>>();
  return make_cpu_backend(name);
}

struct Case {
  std::string name;
  Shape sizes;
  MemoryFormat fmt;
  std::vector<int64_t> rows;  // per rank; they add up to sizes[0]
  bool z = false, relu = false;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"odd_3x5x7x3_rows_2_1", {3, 5, 7, 3}, kNCHW, {2, 1}},
      {"batch1_per_rank_2x4x3x3", {2, 4, 3, 3}, kNCHW, {1, 1}},
      {"rank2_one_row_per_rank_3x6", {3, 6}, kNCHW, {1, 1, 1}},  // one value per channel on each rank
      {"nhwc_4x8x5x3", {4, 8, 5, 3}, kNHWC, {2, 2}},
      {"three_ranks_5x3x2x3", {5, 3, 2, 3}, kNCHW, {2, 2, 1}},
      {"fused_relu_3x5x4x4", {3, 5, 4, 4}, kNCHW, {2, 1}, false, true},
      {"fused_residual_relu_nhwc_2x6x3x5", {2, 6, 3, 5}, kNHWC, {1, 1}, true, true},
      {"fused_residual_4x3x3x3", {4, 3, 3, 3}, kNCHW, {3, 1}, true, false},
  };
  return c;
}

struct Inputs {
  Tensor x, gamma, beta, rm, rv, z, dy;
};
Inputs inputs(const Case& cs, DType dt, uint64_t seed) {
  const int64_t c = cs.sizes[1];
  Inputs in;
  in.x = random_tensor(cs.sizes, dt, seed, -2.0, 3.0, cs.fmt);  // a non-zero mean
  in.gamma = random_tensor({c}, dt, seed + 1, 0.5, 1.5);
  in.beta = random_tensor({c}, dt, seed + 2);
  in.rm = random_tensor({c}, dt, seed + 3, -0.5, 0.5);
  in.rv = random_tensor({c}, dt, seed + 4, 0.5, 2.0);
  if (cs.z) in.z = random_tensor(cs.sizes, dt, seed + 5, -1.0, 1.0, cs.fmt);
  in.dy = random_tensor(cs.sizes, dt, seed + 6, -1.0, 1.0, cs.fmt);
  return in;
}

struct Result {
  Tensor y, save_mean, save_invstd, running_mean, running_var, dx, dgamma, dbeta, dz;
};

// A training forward and its backward on `be` over rows [first, first + count) of `in`,
// synchronised over `sync` when given. Outputs start as NaN: a forgotten element shows.
Result run(Backend& be, const Inputs& in, const Case& cs, int64_t first, int64_t count, ops::ChannelSumReducer* sync) {
  const Tensor x = in.x.narrow(0, first, count), dy = in.dy.narrow(0, first, count);
  const Tensor z = in.z.defined() ? in.z.narrow(0, first, count) : Tensor();
  const DType dt = x.dtype();
  const Shape c{x.size(1)};
  Result r;
  r.y = nan_tensor(x.sizes(), cs.fmt, dt);
  r.save_mean = nan_tensor(c, kNCHW, dt), r.save_invstd = nan_tensor(c, kNCHW, dt);
  r.running_mean = copy_of(in.rm), r.running_var = copy_of(in.rv);
  const Tensor mask = cs.relu ? Tensor::empty(Shape{ops::relu_mask_bytes(x.numel())}, DType::u8) : Tensor();
  ops::BatchNormFwdArgs f{x, in.gamma, in.beta, r.running_mean, r.running_var, r.y, r.save_mean, r.save_invstd};
  f.training = true;
  f.z = z;
  f.relu = cs.relu;
  f.relu_mask = mask;
  f.sync = sync;
  be.batch_norm_fwd(f);
  r.dx = nan_tensor(x.sizes(), cs.fmt, dt);
  r.dgamma = nan_tensor(c, kNCHW, dt), r.dbeta = nan_tensor(c, kNCHW, dt);
  ops::BatchNormBwdArgs b{x, dy, in.gamma, r.save_mean, r.save_invstd, r.dx, r.dgamma, r.dbeta};
  b.training = true;
  b.relu_mask = mask;
  if (cs.relu && cs.z) b.dz = r.dz = nan_tensor(x.sizes(), cs.fmt, dt);
  b.sync = sync;
  be.batch_norm_bwd(b);
  return r;
}

// The sum of same-shaped tensors, in f64 (the comparisons are in double whatever the dtype).
Tensor sum_of(const std::vector<Tensor>& ts, const Tensor& like) {
  std::vector<double> acc(static_cast<size_t>(like.numel()), 0.0);
  for (const Tensor& t : ts) {
    const std::vector<double> v = t.to_vector<double>();
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += v[i];
  }
  return Tensor::from_vector(acc, like.sizes());
}

// Every rank of a world of cs.rows.size() running `backend` against the reference over the whole batch.
void check_case(const std::string& backend, const Case& cs, DType dt, double tol, uint64_t seed) {
  SCOPED_TRACE(backend + " " + cs.name + " " + std::string(dtype_name(dt)));
  const Inputs in = inputs(cs, dt, seed);
  backends::BackendAdapter<ReferenceBackend> whole_be;
  const Result whole = run(whole_be, in, cs, 0, cs.sizes[0], nullptr);

  const int n = static_cast<int>(cs.rows.size());
  std::vector<int64_t> first(cs.rows.size(), 0);
  std::partial_sum(cs.rows.begin(), cs.rows.end() - 1, first.begin() + 1);
  ThreadWorld world(n);
  std::vector<Result> part(cs.rows.size());
  world.run([&](int r) {
    auto be = make_backend(backend);
    part[r] = run(*be, in, cs, first[r], cs.rows[r], &world.rank(r));
  });
  std::vector<Tensor> dgammas, dbetas;
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(world.rank(r).calls(), 2) << "one reduction in the forward, one in the backward";
    const Result& p = part[r];
    auto rows = [&](const Tensor& t) { return t.narrow(0, first[r], cs.rows[r]); };
    STRATA_EXPECT_CLOSE(p.y, rows(whole.y), tol, "y");
    STRATA_EXPECT_CLOSE(p.save_mean, whole.save_mean, tol, "save_mean");
    STRATA_EXPECT_CLOSE(p.save_invstd, whole.save_invstd, tol, "save_invstd");
    STRATA_EXPECT_CLOSE(p.running_mean, whole.running_mean, tol, "running_mean");
    STRATA_EXPECT_CLOSE(p.running_var, whole.running_var, tol, "running_var");
    STRATA_EXPECT_CLOSE(p.dx, rows(whole.dx), tol, "dx");
    if (whole.dz.defined()) {
      STRATA_EXPECT_CLOSE(p.dz, rows(whole.dz), tol, "dz");
    }
    dgammas.push_back(p.dgamma);
    dbetas.push_back(p.dbeta);
  }
  STRATA_EXPECT_CLOSE(sum_of(dgammas, whole.dgamma), whole.dgamma, tol, "dgamma summed over the ranks");
  STRATA_EXPECT_CLOSE(sum_of(dbetas, whole.dbeta), whole.dbeta, tol, "dbeta summed over the ranks");
}

class SyncBatchNorm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!make_backend(GetParam())) GTEST_SKIP() << "backend " << GetParam() << " is not built";
  }
};

TEST_P(SyncBatchNorm, RanksComputeTheWholeBatchF32) {
  uint64_t seed = 500;
  for (const Case& cs : cases()) check_case(GetParam(), cs, DType::f32, kTolReduction, seed += 10);
}

TEST(SyncBatchNormReference, RanksComputeTheWholeBatchF64) {
  uint64_t seed = 700;
  for (const Case& cs : cases()) check_case("reference", cs, DType::f64, 1e-12, seed += 10);
}

// Through the front end, which leaves a group of one out (ops::active_sync): the plain
// batch norm's bits, fused or not, as PyTorch's SyncBatchNorm on one process.
TEST_P(SyncBatchNorm, GroupOfOneIsPlainBatchNormBitwise) {
  auto be = make_backend(GetParam());
  const ops::VirtualDispatch d(*be);
  for (const Case& cs : cases()) {
    SCOPED_TRACE(cs.name);
    const Inputs in = inputs(cs, DType::f32, 900);
    CountingGroup one(1);
    auto step = [&](ops::ChannelSumReducer* sync) {
      const Tensor rm = copy_of(in.rm), rv = copy_of(in.rv);
      const ops::BatchNormOut o =
          ops::batch_norm(d, in.x, in.gamma, in.beta, rm, rv, true, 0.1, 1e-5, in.z, cs.relu, sync);
      const ops::BatchNormGrads g = ops::batch_norm_bwd(d, in.x, in.dy, in.gamma, o.save_mean, o.save_invstd, true,
                                                        o.relu_mask, cs.z, sync);
      return std::vector<Tensor>{o.y, o.save_mean, o.save_invstd, rm, rv, g.dx, g.dgamma, g.dbeta};
    };
    const std::vector<Tensor> plain = step(nullptr), synced = step(&one);
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(bitwise_equal(synced[i], plain[i])) << "output " << i;
    EXPECT_EQ(one.calls, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, SyncBatchNorm, ::testing::Values("reference", "onednn", "openblas", "eigen"),
                         backend_param_name);

// d/dx, d/dgamma and d/dbeta of L = sum over both ranks of w * y, by central differences
// in f64: a value of one rank moves the statistics, hence the outputs, of the other.
TEST(SyncBatchNormReference, GradientByFiniteDifferencesThroughTwoRanks) {
  const Case cs{"fd_3x2x2x3", {3, 2, 2, 3}, kNCHW, {2, 1}};
  const Inputs in = inputs(cs, DType::f64, 1234);  // in.dy is the weight w of the loss
  const std::vector<int64_t> first{0, 2};
  auto loss = [&](const Inputs& at) {
    ThreadWorld world(2);
    std::vector<double> l(2, 0.0);
    world.run([&](int r) {
      backends::BackendAdapter<ReferenceBackend> be;
      const Result p = run(be, at, cs, first[r], cs.rows[r], &world.rank(r));
      const std::vector<double> y = p.y.to_vector<double>(), w = at.dy.narrow(0, first[r], cs.rows[r]).to_vector<double>();
      for (size_t i = 0; i < y.size(); ++i) l[r] += w[i] * y[i];
    });
    return l[0] + l[1];
  };
  ThreadWorld world(2);
  std::vector<Result> part(2);
  world.run([&](int r) {
    backends::BackendAdapter<ReferenceBackend> be;
    part[r] = run(be, in, cs, first[r], cs.rows[r], &world.rank(r));
  });
  const double h = 1e-6, tol = 1e-7;
  // dL/d(element i of in.*member), by a central difference.
  auto numeric = [&](Tensor Inputs::*member, int64_t i) {
    Inputs at = in;
    const std::vector<double> base = (in.*member).to_vector<double>();
    double l[2];
    for (int s = 0; s < 2; ++s) {
      std::vector<double> v = base;
      v[static_cast<size_t>(i)] += s == 0 ? h : -h;
      at.*member = Tensor::from_vector(v, (in.*member).sizes());
      l[s] = loss(at);
    }
    return (l[0] - l[1]) / (2 * h);
  };
  std::vector<double> dx;
  for (int r = 0; r < 2; ++r)
    for (double v : part[r].dx.to_vector<double>()) dx.push_back(v);
  for (int64_t i = 0; i < in.x.numel(); ++i) EXPECT_NEAR(dx[static_cast<size_t>(i)], numeric(&Inputs::x, i), tol) << "dx " << i;
  const std::vector<double> dg = sum_of({part[0].dgamma, part[1].dgamma}, part[0].dgamma).to_vector<double>();
  const std::vector<double> db = sum_of({part[0].dbeta, part[1].dbeta}, part[0].dbeta).to_vector<double>();
  for (int64_t c = 0; c < cs.sizes[1]; ++c) {
    EXPECT_NEAR(dg[static_cast<size_t>(c)], numeric(&Inputs::gamma, c), tol) << "dgamma " << c;
    EXPECT_NEAR(db[static_cast<size_t>(c)], numeric(&Inputs::beta, c), tol) << "dbeta " << c;
  }
}

}  // namespace
}  // namespace strata::testing
