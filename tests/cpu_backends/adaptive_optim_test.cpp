// RMSprop, Adagrad and Adadelta on each CPU backend against the reference: every
// configuration of support/adaptive_optim_cases.h over several steps, in the layouts a
// model's parameters have and in a size onednn splits over its threads, with graph mode's
// run-time hyperparameters and loss scaling's state mixed in; the lists against the
// single steps bitwise; f64 at f64 precision.
#include <string>
#include <vector>

#include "cpu_backend_test_util.h"
#include "strata/backends/api/registry.h"
#include "support/adaptive_optim_cases.h"
#include "support/optimizer_lists.h"

namespace strata::testing {
namespace {

STRATA_COVERS(rmsprop_step, "vs_reference");
STRATA_COVERS(adagrad_step, "vs_reference");
STRATA_COVERS(adadelta_step, "vs_reference");
STRATA_COVERS(multi_rmsprop_step, "vs_reference");
STRATA_COVERS(multi_adagrad_step, "vs_reference");
STRATA_COVERS(multi_adadelta_step, "vs_reference");

class AdaptiveOptimTest : public CpuBackendTest {
 protected:
  Backend& reference() { return backends::registry().get("reference"); }
};

// Step 1 plain; step 2 with the learning rate (and Adagrad's count) read from a hyper, the
// options' lr a decoy; step 3 with loss scaling: the gradient scaled by 256 and read times
// 1/256, one skipped step before it (Adagrad's count passed as attempts plus skips).
TEST_P(AdaptiveOptimTest, StepsMatchTheReference) {
  const Tensor amp = Tensor::from_vector<double>({256.0, 0.0, 1.0, 1.0 / 256.0}, Shape{4});
  uint64_t seed = 51000;
  for (const AdaptiveCase& c : adaptive_cases())
    for (const ParamLayout& l : param_layouts({70001})) {
      SCOPED_TRACE(c.name + ", " + l.name);
      const Tensor base = rand_f32(l.sizes, seed += 10, l.fmt);
      const Tensor p = l.transposed ? copy_of(base).permute({1, 0}) : copy_of(base);
      const Tensor p_r = copy_of(p);
      const std::vector<Tensor> st = new_state(c, p), st_r = new_state(c, p_r);
      for (int64_t t = 1; t <= 3; ++t) {
        const Tensor g = rand_f32(p.sizes(), seed + static_cast<uint64_t>(t));
        if (t == 1) {
          adaptive_step(be(), c, p, g, st, t);
        } else if (t == 2) {
          const Tensor hyper = Tensor::from_vector<double>({case_lr(c), 2.0}, Shape{2});
          adaptive_step(be(), c, p, g, st, 77, hyper, {}, 123.0);
        } else {
          const Tensor scaled = copy_of(g);
          ReferenceBackend{}.scale({g, scaled, 256.0});
          adaptive_step(be(), c, p, scaled, st, t + 1, {}, amp);
        }
        adaptive_step(reference(), c, p_r, g, st_r, t);
      }
      STRATA_EXPECT_CLOSE(p, p_r, kTolReduction, "param");
      for (size_t k = 0; k < st.size(); ++k)
        STRATA_EXPECT_CLOSE(st[k], st_r[k], kTolReduction, "state " + std::to_string(k));
    }
}

// A step that loss scaling skips writes nothing.
TEST_P(AdaptiveOptimTest, SkippedStepWritesNothing) {
  const Tensor skipped = Tensor::from_vector<double>({128.0, 0.0, 4.0, 0.0}, Shape{4});
  for (const AdaptiveCase& c : adaptive_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor p = rand_f32({4, 9}, 52000), g = rand_f32({4, 9}, 52001);
    const std::vector<Tensor> st = new_state(c, p);
    adaptive_step(be(), c, p, g, st, 5, {}, skipped);
    EXPECT_TRUE(bitwise_equal(p, rand_f32({4, 9}, 52000)));
    for (const Tensor& s : st) EXPECT_TRUE(bitwise_equal(s, new_state(c, p)[0]));
  }
}

TEST_P(AdaptiveOptimTest, MultiTensorStepsMatchSingleSteps) {
  expect_adaptive_multi_steps_match_single_steps(be(), [](const Tensor& t) { return t; });
}

TEST_P(AdaptiveOptimTest, F64MatchesReference) {
  for (const AdaptiveCase& c : adaptive_cases()) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(be().supports(ops::OpId::rmsprop_step, DType::f64));  // every CPU backend: a loop
    const Tensor p = random_tensor({3, 7}, DType::f64, 53000), p_r = copy_of(p);
    const std::vector<Tensor> st = new_state(c, p), st_r = new_state(c, p_r);
    for (int64_t t = 1; t <= 3; ++t) {
      const Tensor g = random_tensor({3, 7}, DType::f64, 53000 + static_cast<uint64_t>(t));
      adaptive_multi_step(be(), c, {p}, {g}, {st}, {t});
      adaptive_step(reference(), c, p_r, g, st_r, t);
    }
    STRATA_EXPECT_CLOSE(p, p_r, 1e-12, "param f64");
  }
}

STRATA_CPU_BACKEND_SUITE(AdaptiveOptimTest);

}  // namespace
}  // namespace strata::testing
