// The gradient buckets of data-parallel training on the CPU reference backend, with an
// in-process fake world in place of NCCL: gradients as views of the bucket buffers
// (written in place by direct mode's plans, copied in once by the tape modes), the
// fallbacks, the overlap of the buckets with backward in every mode, and the errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "nn/nn_test_util.h"
#include "strata/dist/grad_buckets.h"

namespace strata::testing {
namespace {

using dist::DataParallelOptions;
using dist::GradientBuckets;
using ops::DispatchMode;

// A world of `world` ranks in which the other ranks' gradients are `peer` times this
// rank's: the mean is this rank's times (1 + (world - 1) * peer) / world. peer 1 (the
// replicas agree) leaves every gradient as it was, bit for bit; world 2 with peer 0
// halves it (exact in binary floating point). It notes what it is asked to do.
class FakeWorld final : public dist::GradientReducer {
 public:
  explicit FakeWorld(int world = 2, double peer = 1.0) : world_(world), factor_((1 + (world - 1) * peer) / world) {}
  int world() const override { return world_; }
  void begin() override { log.push_back("begin"); }
  void copy(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    ++copies;
  }
  void all_reduce_mean(void* data, size_t count, DType dt) override {
    log.push_back("reduce");
    reduced.push_back(data);
    dtypes.push_back(dt);
    if (factor_ == 1.0) return;
    const auto f = static_cast<float>(factor_);
    for (size_t i = 0; i < count; ++i) {
      switch (dt) {
        case DType::f32: static_cast<float*>(data)[i] *= f; break;
        case DType::f64: static_cast<double*>(data)[i] *= factor_; break;
        case DType::bf16: {
          auto* h = static_cast<bf16_t*>(data) + i;
          *h = to_bf16(from_bf16(*h) * f);
          break;
        }
        case DType::f16: {
          auto* h = static_cast<f16_t*>(data) + i;
          *h = to_f16(from_f16(*h) * f);
          break;
        }
        default: FAIL() << "FakeWorld: gradients in " << dtype_name(dt);
      }
    }
  }
  void end(const char* what) override { log.push_back(std::string("end ") + what); }

  std::vector<std::string> log;
  std::vector<void*> reduced;
  std::vector<DType> dtypes;
  int copies = 0;

 private:
  int world_;
  double factor_;
};

const Tensor& images() {
  static const Tensor x = random_tensor({4, 3, 8, 8}, DType::f32, 11);
  return x;
}
const Tensor& labels() {
  static const Tensor y = Tensor::from_vector(std::vector<int64_t>{1, 7, 3, 0}, Shape{4});
  return y;
}

std::unique_ptr<nn::Model> model(DispatchMode mode, DType dt = DType::f32, const nn::ModelOptions& o = {}) {
  return nn::make_resnet(tiny_resnet(18, dt), mode, "reference", o);
}
nn::OptimizerConfig sgd() {
  nn::OptimizerConfig c;
  c.lr = 0.05;
  c.momentum = 0.9;
  return c;
}
// A small cap: many buckets, so the overlap and the bucket order are visible.
DataParallelOptions small_buckets(bool views = true) {
  DataParallelOptions o;
  o.bucket_bytes = 16 * 1024;
  o.gradient_as_bucket_view = views;
  return o;
}
bool inside(const Tensor& t, const Tensor& buffer) {
  const auto* p = static_cast<const char*>(t.data_ptr());
  const auto* b = static_cast<const char*>(buffer.data_ptr());
  return p >= b && p + t.nbytes() <= b + buffer.nbytes();
}

TEST(GradBuckets, ViewsLieInTheirBucketsAligned) {
  auto m = model(DispatchMode::direct);
  FakeWorld w;
  GradientBuckets gb(*m, w, small_buckets());
  ASSERT_GT(gb.num_buckets(), 2u);
  const nn::StateDict params = m->module().named_parameters();
  std::vector<int> seen(params.size(), 0);
  for (size_t b = 0; b < gb.num_buckets(); ++b) {
    for (size_t i : gb.layout()[b].params) {
      ++seen[i];
      const Tensor& v = gb.view(i);
      EXPECT_TRUE(inside(v, gb.buffer(b))) << params[i].first;
      EXPECT_EQ(v.sizes(), params[i].second.sizes()) << params[i].first;
      EXPECT_TRUE(v.is_contiguous()) << params[i].first;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data_ptr()) % 64, 0u) << params[i].first << ": not cache-line aligned";
      EXPECT_TRUE(params[i].second.grad_home().same(v)) << params[i].first << ": the view is not its gradient home";
    }
  }
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(seen[i], 1) << params[i].first;
}

// Every mode: after a step each .grad() is its view and holds the mean over the ranks,
// and the arithmetic is the one-process arithmetic bit for bit (world 2, peer 0: half).
TEST(GradBuckets, GradientsAreTheAveragedBucketViewsInEveryMode) {
  for (DispatchMode mode : kAllModes) {
    for (bool views : {true, false}) {
      SCOPED_TRACE(std::string(ops::dispatch_mode_name(mode)) + (views ? " views" : " staging"));
      auto plain = model(mode);
      auto opt_plain = plain->make_optimizer(sgd());
      const StepOutputs want = snapshot(*plain, plain->train_step(images(), labels(), *opt_plain));

      auto m = model(mode);
      FakeWorld w(2, 0.0);
      GradientBuckets gb(*m, w, small_buckets(views));
      auto opt = m->make_optimizer(sgd());
      m->train_step(images(), labels(), *opt);
      const nn::StateDict params = m->module().named_parameters();
      size_t in_multi = 0;
      for (const auto& l : gb.layout()) in_multi += l.params.size() > 1 ? l.params.size() : 0;
      for (size_t i = 0; i < params.size(); ++i) {
        const Tensor g = params[i].second.grad();
        ASSERT_TRUE(g.defined()) << params[i].first;
        EXPECT_EQ(g.same(gb.view(i)), views) << params[i].first;
        const std::vector<double> got = g.to_vector<double>(), full = want.grads[i].second.to_vector<double>();
        ASSERT_EQ(got.size(), full.size());
        for (size_t k = 0; k < got.size(); ++k)
          ASSERT_EQ(got[k], 0.5 * full[k]) << params[i].first << "[" << k << "]";
      }
      // Direct mode's plans write into the views: no copy. The tape modes copy each
      // gradient in once; staging copies in and out (a bucket of one is averaged in place).
      const int64_t expect = !views ? static_cast<int64_t>(2 * in_multi)
                             : mode == DispatchMode::direct ? 0
                                                            : static_cast<int64_t>(params.size());
      EXPECT_EQ(gb.copies(), expect);
    }
  }
}

// Several steps with views give the very state of the staging path and of a model
// trained alone (replicas that agree: the mean changes nothing).
TEST(GradBuckets, ViewsChangeNoBitOverSeveralSteps) {
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(ops::dispatch_mode_name(mode));
    std::vector<StepOutputs> outs;
    for (int variant = 0; variant < 3; ++variant) {  // alone, staging, views
      auto m = model(mode);
      FakeWorld w;
      std::unique_ptr<GradientBuckets> gb;
      if (variant > 0) gb = std::make_unique<GradientBuckets>(*m, w, small_buckets(variant == 2));
      auto opt = m->make_optimizer(sgd());
      nn::StepResult r;
      for (int s = 0; s < 3; ++s) r = m->train_step(images(), labels(), *opt);
      outs.push_back(snapshot(*m, r));
    }
    expect_bitwise(outs[0], outs[1], "staging vs alone");
    expect_bitwise(outs[0], outs[2], "views vs alone");
  }
}

// Mixed precision in direct mode: the plans' conversion of each gradient to the master
// weights' dtype writes into the view (f64 parameters, f32 compute on the reference).
TEST(GradBuckets, DirectMixedPrecisionConvertsIntoTheViews) {
  nn::ModelOptions o;
  o.compute_dtype = DType::f32;
  auto m = model(DispatchMode::direct, DType::f64, o);
  FakeWorld w;
  GradientBuckets gb(*m, w, small_buckets());
  auto opt = m->make_optimizer(sgd());
  m->train_step(images(), labels(), *opt);
  m->train_step(images(), labels(), *opt);
  EXPECT_EQ(gb.copies(), 0);
  const nn::StateDict params = m->module().named_parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(params[i].second.grad().same(gb.view(i))) << params[i].first;
}

// Plans made before the buckets keep their own gradient buffers: those gradients are
// copied in (the fallback), with the same results.
TEST(GradBuckets, PlansMadeBeforeTheBucketsFallBackToACopy) {
  auto plain = model(DispatchMode::direct);
  auto opt_plain = plain->make_optimizer(sgd());
  auto m = model(DispatchMode::direct);
  auto opt = m->make_optimizer(sgd());
  plain->train_step(images(), labels(), *opt_plain);
  m->train_step(images(), labels(), *opt);
  FakeWorld w;
  GradientBuckets gb(*m, w, small_buckets());
  const StepOutputs want = snapshot(*plain, plain->train_step(images(), labels(), *opt_plain));
  const StepOutputs got = snapshot(*m, m->train_step(images(), labels(), *opt));
  expect_bitwise(want, got, "copied into the views");
  EXPECT_EQ(gb.copies(), static_cast<int64_t>(want.grads.size()));
}

// Overlap: in every mode each bucket starts during backward, in bucket order, before
// the gradient hook; the hook then only closes the step.
TEST(GradBuckets, BucketsStartDuringBackwardInBucketOrder) {
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(ops::dispatch_mode_name(mode));
    auto m = model(mode);
    FakeWorld w;
    GradientBuckets gb(*m, w, small_buckets());
    auto opt = m->make_optimizer(sgd());
    for (int s = 0; s < 2; ++s) {
      w.log.clear();
      w.reduced.clear();
      m->forward_loss(images(), labels());
      m->backward();
      // Before the gradient hook: every bucket has started.
      ASSERT_EQ(w.reduced.size(), gb.num_buckets());
      for (size_t b = 0; b < gb.num_buckets(); ++b) EXPECT_EQ(w.reduced[b], gb.buffer(b).data_ptr()) << b;
      gb.average_gradients();
      EXPECT_EQ(gb.started_early(), gb.num_buckets());
      EXPECT_EQ(w.log.back(), "end all-reduce of the gradients of step " + std::to_string(s + 1));
      opt->step();
      opt->zero_grad();
    }
  }
}

TEST(GradBuckets, TwoBackwardPassesInOneStepAreRefused) {
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(ops::dispatch_mode_name(mode));
    auto m = model(mode);
    FakeWorld w;
    GradientBuckets gb(*m, w, small_buckets());
    m->forward_loss(images(), labels());
    m->backward();
    m->forward_loss(images(), labels());
    EXPECT_STRATA_ERROR(m->backward(), "was completed twice before the optimizer's step");
  }
}

TEST(GradBuckets, OneRankInstallsNothing) {
  auto m = model(DispatchMode::direct);
  FakeWorld w(1);
  GradientBuckets gb(*m, w, small_buckets());
  for (const Tensor& p : m->module().parameters()) EXPECT_FALSE(p.grad_home().defined());
  auto opt = m->make_optimizer(sgd());
  m->train_step(images(), labels(), *opt);
  EXPECT_TRUE(w.log.empty());
}

TEST(GradBuckets, RemovedWithTheObject) {
  auto m = model(DispatchMode::virtual_call);
  FakeWorld w;
  { GradientBuckets gb(*m, w, small_buckets()); }
  for (const Tensor& p : m->module().parameters()) EXPECT_FALSE(p.grad_home().defined());
  auto opt = m->make_optimizer(sgd());
  m->train_step(images(), labels(), *opt);
  EXPECT_TRUE(w.log.empty());
}

// Exchanged in bf16 or f16 (PyTorch DDP's compress hooks): in every mode, with the views and
// staged, the reducer averages the narrow copies, and each gradient ends as its one-process value
// rounded to that dtype, then halved in it (world 2, peer 0: exact but for f16's subnormals).
TEST(GradBuckets, ExchangedInHalfPrecisionIsTheRoundedMean) {
  for (DType low : {DType::bf16, DType::f16}) {
    for (DispatchMode mode : kAllModes) {
      for (bool views : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(low)) + " " + std::string(ops::dispatch_mode_name(mode)) +
                     (views ? " views" : " staging"));
        auto plain = model(mode);
        auto opt_plain = plain->make_optimizer(sgd());
        const StepOutputs want = snapshot(*plain, plain->train_step(images(), labels(), *opt_plain));

        auto m = model(mode);
        FakeWorld w(2, 0.0);
        DataParallelOptions o = small_buckets(views);
        o.exchange_dtype = low;
        GradientBuckets gb(*m, w, o);
        EXPECT_NE(gb.describe().find("exchanged in " + std::string(dtype_name(low))), std::string::npos);
        auto opt = m->make_optimizer(sgd());
        m->train_step(images(), labels(), *opt);
        ASSERT_EQ(w.reduced.size(), gb.num_buckets());
        for (size_t b = 0; b < gb.num_buckets(); ++b) {
          EXPECT_EQ(w.reduced[b], gb.exchanged(b).data_ptr()) << b;
          EXPECT_EQ(w.dtypes[b], low) << b;
          EXPECT_EQ(gb.exchanged(b).numel(), gb.buffer(b).numel()) << b;
        }
        const nn::StateDict params = m->module().named_parameters();
        size_t rounded = 0, total = 0;
        for (size_t i = 0; i < params.size(); ++i) {
          const Tensor g = params[i].second.grad();
          ASSERT_TRUE(g.defined()) << params[i].first;
          EXPECT_EQ(g.same(gb.view(i)), views) << params[i].first;
          EXPECT_EQ(g.dtype(), DType::f32) << params[i].first;
          const std::vector<float> got = g.to_vector<float>(), full = want.grads[i].second.to_vector<float>();
          ASSERT_EQ(got.size(), full.size());
          for (size_t k = 0; k < got.size(); ++k) {
            const auto round = [low](float v) { return low == DType::bf16 ? from_bf16(to_bf16(v)) : from_f16(to_f16(v)); };
            const float r = round(full[k]);
            ASSERT_EQ(got[k], round(0.5f * r)) << params[i].first << "[" << k << "] of " << full[k];
            rounded += r != full[k];
            ++total;
          }
        }
        EXPECT_GT(rounded, total / 10) << "the gradients were not rounded: no exchange in " << dtype_name(low);
      }
    }
  }
}

TEST(GradBuckets, ExchangeDtypeWiderOrNotFloatingIsRefused) {
  for (DType bad : {DType::f64, DType::i32}) {
    auto m = model(DispatchMode::direct);
    FakeWorld w;
    DataParallelOptions o;
    o.exchange_dtype = bad;
    EXPECT_STRATA_ERROR(GradientBuckets(*m, w, o), "gradients cross the links in the parameters' dtype, bf16 or f16");
  }
}

TEST(GradBuckets, ExchangeDtypeFromItsOptionName) {
  EXPECT_FALSE(dist::exchange_dtype_from_name("").has_value());
  EXPECT_EQ(dist::exchange_dtype_from_name("bf16"), DType::bf16);
  EXPECT_EQ(dist::exchange_dtype_from_name("f16"), DType::f16);
  EXPECT_STRATA_ERROR(dist::exchange_dtype_from_name("fp8"), "--grad-exchange fp8: the gradients cross the links in bf16 or f16");
}

TEST(GradBuckets, HalfPrecisionParametersAreRefused) {
  auto m = nn::make_resnet(tiny_resnet(18, DType::bf16), DispatchMode::virtual_call, "reference");
  FakeWorld w;
  EXPECT_STRATA_ERROR(GradientBuckets(*m, w), "gradients are averaged in f32 or f64");
}

}  // namespace
}  // namespace strata::testing
