// RMSprop, Adagrad and Adadelta on the reference backend against the oracle written from
// torch.optim's algorithms (support/adaptive_optim_cases.h): every configuration over
// several steps, parameters and state in f64 (channels-last, the gradient in another
// layout) through the single and the list ops; in f32 within f32's rounding; the lists
// with every run-time form (graph mode's hypers, loss scaling) giving the single steps' bits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference_test_util.h"
#include "strata/backends/api/registry.h"
#include "support/adaptive_optim_cases.h"
#include "support/coverage.h"
#include "support/optimizer_lists.h"

namespace strata::testing {
namespace {

STRATA_COVERS(rmsprop_step, "values");
STRATA_COVERS(adagrad_step, "values");
STRATA_COVERS(adadelta_step, "values");
STRATA_COVERS(multi_rmsprop_step, "values");
STRATA_COVERS(multi_adagrad_step, "values");
STRATA_COVERS(multi_adadelta_step, "values");

// `steps` steps of the reference in dtype dt against the oracle in f64; the largest
// relative error of the parameter and each state tensor.
void expect_oracle_steps(const AdaptiveCase& c, DType dt, bool list, double tol) {
  backends::Backend& ref = backends::registry().get("reference");
  const Shape s{2, 3, 2, 2};
  const Tensor p = random_tensor(s, dt, 9, -1, 1, kNHWC);
  const std::vector<Tensor> st = new_state(c, p);
  std::vector<double> ep = p.to_vector<double>();
  std::vector<std::vector<double>> es;
  for (const Tensor& t : st) es.push_back(t.to_vector<double>());
  for (int64_t t = 1; t <= 5; ++t) {
    const Tensor g = random_tensor(s, dt, 300 + static_cast<uint64_t>(t));
    if (list)
      adaptive_multi_step(ref, c, {p}, {g}, {st}, {t});
    else
      adaptive_step(ref, c, p, g, st, t);
    oracle_step(c, ep, g.to_vector<double>(), es, t);
  }
  EXPECT_TRUE(close(p, Tensor::from_vector(ep, s), tol)) << "param";
  for (size_t k = 0; k < st.size(); ++k) EXPECT_TRUE(close(st[k], Tensor::from_vector(es[k], s), tol)) << "state " << k;
}

TEST(ReferenceAdaptiveOptim, F64MatchesTorchOptimsAlgorithmsOverSeveralSteps) {
  for (const AdaptiveCase& c : adaptive_cases())
    for (bool list : {false, true}) {
      SCOPED_TRACE(c.name + (list ? ", list" : ", single"));
      expect_oracle_steps(c, DType::f64, list, 1e-13);
    }
}

TEST(ReferenceAdaptiveOptim, F32TracksTheF64Oracle) {
  for (const AdaptiveCase& c : adaptive_cases()) {
    SCOPED_TRACE(c.name);
    expect_oracle_steps(c, DType::f32, false, 2e-6);
  }
}

// A wrong term would move these by far more than the tolerance: the first step of each at
// torch.optim's defaults, worked by hand for g = 0.5 from zero state.
TEST(ReferenceAdaptiveOptim, FirstStepAtTheDefaultsByHand) {
  backends::Backend& ref = backends::registry().get("reference");
  struct Want {
    Adaptive kind;
    double delta;
  };
  for (const Want& w : std::vector<Want>{{Adaptive::rmsprop, 0.01 * 0.5 / (std::sqrt(0.01 * 0.25) + 1e-8)},
                                         {Adaptive::adagrad, 0.01 * 0.5 / (0.5 + 1e-10)},
                                         {Adaptive::adadelta, std::sqrt(1e-6) / std::sqrt(0.1 * 0.25 + 1e-6) * 0.5}}) {
    AdaptiveCase c{"defaults", w.kind};
    const Tensor p = from_values({1.0}, {1}), g = from_values({0.5}, {1});
    adaptive_step(ref, c, p, g, new_state(c, p), 1);
    EXPECT_NEAR(p.to_vector<double>()[0], 1.0 - w.delta, 1e-15) << static_cast<int>(w.kind);
  }
}

TEST(ReferenceAdaptiveOptim, MultiTensorStepsMatchSingleSteps) {
  expect_adaptive_multi_steps_match_single_steps(backends::registry().get("reference"),
                                                 [](const Tensor& t) { return t; });
}

// Adagrad's count is 1-based: lr_decay would grow the rate at step 0.
TEST(ReferenceAdaptiveOptim, AdagradRefusesStepZero) {
  backends::ReferenceBackend ref;
  const Tensor p = from_values({1.0}, {1}), g = from_values({0.5}, {1}), sum = from_values({0.0}, {1});
  EXPECT_THROW(ref.adagrad_step({p, g, sum, {}, 0}), Error);
}

}  // namespace
}  // namespace strata::testing
