// Data-parallel training with synchronised batch norm on the CPU reference backend, the
// ranks threads of an in-process world (support/replicas.h) in place of NCCL: two ranks of
// batch B, each averaging its gradients in its buckets and synchronising its batch norms
// over the world (nn::convert_sync_batch_norm), train as one process on the batch 2B: the
// same losses, gradients, parameters and running statistics, in f64 to 1e-10, in every
// dispatch mode, fused and not. Per-rank batch norm (the default) does not, which the test
// checks too.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nn/nn_test_util.h"
#include "strata/dist/grad_buckets.h"
#include "strata/nn/layers/batch_norm.h"
#include "support/replicas.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

// The gradient buckets' side of a thread world's rank: the mean over the ranks.
class BucketRank final : public dist::GradientReducer {
 public:
  explicit BucketRank(ThreadWorld::Rank& r) : r_(r) {}
  int world() const override { return r_.world(); }
  void begin() override {}
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void all_reduce_mean(void* data, size_t count, DType dt) override { r_.all_reduce_mean(data, count, dt); }
  void end(const char*) override {}

 private:
  ThreadWorld::Rank& r_;
};

constexpr int64_t kRanks = 2, kRows = 3;  // per rank: odd, so no row count is a power of two
constexpr int kSteps = 2;

const Tensor& images() {
  static const Tensor x = random_tensor({kRanks * kRows, 3, 8, 8}, DType::f64, 21);
  return x;
}
const Tensor& labels() {
  static const Tensor y = Tensor::from_vector(std::vector<int64_t>{1, 7, 3, 0, 9, 4}, Shape{kRanks * kRows});
  return y;
}

std::unique_ptr<nn::Model> model(DispatchMode mode, bool fuse) {
  nn::ResNetConfig c = tiny_resnet(18, DType::f64);
  c.fuse_train = fuse;  // the fused batch norm + residual + ReLU of the blocks, or the separate ops
  return nn::make_resnet(c, mode, "reference");
}
nn::OptimizerConfig sgd() {
  nn::OptimizerConfig c;
  c.lr = 0.05;
  c.momentum = 0.9;
  return c;
}

struct Trained {
  std::vector<double> losses;  // per step; the ranks' mean for a world
  StepOutputs last;            // rank 0's
  StepOutputs other;           // rank 1's (a world only)
};

Trained alone(DispatchMode mode, bool fuse) {
  auto m = model(mode, fuse);
  auto opt = m->make_optimizer(sgd());
  Trained t;
  nn::StepResult r;
  for (int s = 0; s < kSteps; ++s) {
    r = m->train_step(images(), labels(), *opt);
    t.losses.push_back(r.loss.item());
  }
  t.last = snapshot(*m, r);
  return t;
}

Trained world_of_two(DispatchMode mode, bool fuse, bool sync) {
  ThreadWorld world(kRanks);
  std::vector<std::vector<double>> losses(kRanks);
  std::vector<StepOutputs> last(kRanks);
  std::vector<int> synced(kRanks, 0);
  world.run([&](int r) {
    auto m = model(mode, fuse);
    BucketRank reducer(world.rank(r));
    dist::GradientBuckets gb(*m, reducer);
    if (sync) synced[r] = nn::convert_sync_batch_norm(m->module(), &world.rank(r));
    auto opt = m->make_optimizer(sgd());
    const Tensor x = images().narrow(0, r * kRows, kRows).clone(), y = labels().narrow(0, r * kRows, kRows).clone();
    nn::StepResult res;
    for (int s = 0; s < kSteps; ++s) {
      res = m->train_step(x, y, *opt);
      losses[r].push_back(res.loss.item());
    }
    last[r] = snapshot(*m, res);
  });
  if (sync) {
    EXPECT_EQ(synced[0], 20) << "ResNet-18's batch norms";
  }
  Trained t;
  for (int s = 0; s < kSteps; ++s) t.losses.push_back((losses[0][s] + losses[1][s]) / 2);
  t.last = last[0];
  t.other = last[1];
  return t;
}

// The worst relative difference of the named tensors of two lists.
double worst(const nn::StateDict& a, const nn::StateDict& b, const std::string& only = "") {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (only.empty() || a[i].first.find(only) != std::string::npos)
      w = std::max(w, relative_error(a[i].second, b[i].second));
  return w;
}

TEST(SyncBatchNormDataParallel, TwoRanksTrainAsOneProcessOnTheWholeBatch) {
  for (DispatchMode mode : kAllModes) {
    for (bool fuse : {false, true}) {
      SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)) + (fuse ? " fused" : " unfused"));
      const Trained one = alone(mode, fuse), two = world_of_two(mode, fuse, true);
      for (int s = 0; s < kSteps; ++s) EXPECT_NEAR(two.losses[s], one.losses[s], 1e-10 * one.losses[s]) << "step " << s;
      EXPECT_LT(worst(two.last.grads, one.last.grads), 1e-10) << "gradients";
      EXPECT_LT(worst(two.last.state, one.last.state), 1e-10) << "parameters and running statistics";
      // The ranks agree bit for bit: the same sums reach both.
      expect_bitwise(two.last, StepOutputs{two.last.loss, two.last.logits, two.other.grads, two.other.state},
                     "rank 1's gradients and state vs rank 0's");
    }
  }
}

// Without synchronisation each rank normalises its own 3 rows: the running statistics are
// not those of the whole batch (what makes the test above able to fail).
TEST(SyncBatchNormDataParallel, PerRankBatchNormDiffers) {
  const Trained one = alone(DispatchMode::direct, true), two = world_of_two(DispatchMode::direct, true, false);
  EXPECT_GT(worst(two.last.state, one.last.state, "running_var"), 1e-3);
  EXPECT_GT(std::abs(two.losses[1] - one.losses[1]), 1e-6 * one.losses[1]);
}

// Off again: convert_sync_batch_norm with no group restores per-rank statistics.
TEST(SyncBatchNormDataParallel, ConvertBackToPerRank) {
  auto m = model(DispatchMode::direct, true);
  ThreadWorld world(2);
  EXPECT_EQ(nn::convert_sync_batch_norm(m->module(), &world.rank(0)), 20);
  int synced = 0;
  for (const auto& [name, mod] : m->module().named_modules())
    if (auto* bn = dynamic_cast<nn::SyncableBatchNorm*>(mod)) synced += bn->sync() == &world.rank(0);
  EXPECT_EQ(synced, 20);
  nn::convert_sync_batch_norm(m->module(), nullptr);
  for (const auto& [name, mod] : m->module().named_modules())
    if (auto* bn = dynamic_cast<nn::SyncableBatchNorm*>(mod)) {
      EXPECT_EQ(bn->sync(), nullptr) << name;
    }
  // A step alone then makes no collective call (it would wait for rank 1 forever).
  auto opt = m->make_optimizer(sgd());
  m->train_step(images(), labels(), *opt);
  EXPECT_EQ(world.rank(0).calls(), 0);
}

}  // namespace
}  // namespace strata::testing
