// The bad-input matrix in direct mode (the table: bad_input_cases.h): the plans of
// ops/direct/plans.h validate with the front end's own functions, so every defect a plan
// can see must give the front end's message, word for word (static dispatch runs the same
// front-end templates as virtual dispatch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <typeinfo>
#include <vector>

#include "bad_input_cases.h"
#include "strata/ops/direct/plans.h"
#include "strata/backends/static_backends.h"
#include "strata/ops/direct/dropout_plan.h"
#include "strata/ops/direct/tensor_plans.h"
#include "strata/ops/direct/transformer_plans.h"

namespace strata::testing {
namespace {

// The case's arguments its direct-mode plan takes as they are. A forward plan takes
// all of them; a backward plan is planned after a valid forward and takes only
// grad_output (its other inputs are the forward plan's own). Cases without a plan
// (optimizer steps, most element-wise formulas, conversions) and
// conv2d's bias gradient (validated after the weight gradient, as autograd does)
// have none.
std::vector<std::string> direct_args(const std::string& id) {
  if (id == "conv2d") return {"input", "weight", "bias"};
  if (id == "batch_norm") return {"input", "weight", "bias", "running_mean", "running_var"};
  if (id == "relu" || id == "max_pool2d" || id == "avg_pool2d" || id == "global_avg_pool") return {"input"};
  if (id == "linear") return {"input", "weight", "bias"};
  if (id == "add") return {"a", "b"};
  if (id == "dropout") return {"input"};
  if (id == "softmax_xent") return {"logits", "labels"};
  if (id == "bce_logits") return {"logits", "targets"};
  if (id == "layer_norm") return {"input", "weight", "bias"};
  if (id == "attention") return {"query", "key", "value"};
  if (id == "exp" || id == "sum_dims") return {"input"};
  if (id == "bmm") return {"a", "b"};
  if (id == "index_select") return {"input", "index"};
  if (id == "index_add") return {"source", "index"};
  if (id == "conv2d_bwd_data" || id == "conv2d_bwd_weight" || id == "batch_norm_bwd" || id == "relu_bwd" ||
      id == "max_pool2d_bwd" || id == "avg_pool2d_bwd" || id == "global_avg_pool_bwd" || id == "linear_bwd_data" ||
      id == "linear_bwd_weight" || id == "layer_norm_bwd" || id == "attention_bwd" || id == "tanh_bwd")
    return {"grad_output"};
  return {};
}

// Plans case `id` on `impl` with the case's arguments `a` (in the case's order): the
// same call the front-end case makes, as a direct-mode network would plan it.
template <class Impl>
void plan_case(const std::string& id, Impl& impl, const std::vector<Tensor>& a) {
  namespace dp = ops::direct;
  const Conv2dParams cp;
  const Pool2dParams pp;
  if (id == "conv2d") {
    dp::Conv2dPlan<Impl>().plan(impl, a[0], a[1], a[2], cp);
  } else if (id == "conv2d_bwd_data") {
    dp::Conv2dPlan<Impl> p;
    p.plan(impl, rnd({2, 3, 6, 6}), a[1], Tensor(), cp);
    p.plan_backward(a[0], /*need_dx=*/true);
  } else if (id == "conv2d_bwd_weight") {
    dp::Conv2dPlan<Impl> p;
    p.plan(impl, a[0], rnd({4, 3, 3, 3}, DType::f32, 2), Tensor(), cp);
    p.plan_backward(a[1], /*need_dx=*/false);
  } else if (id == "batch_norm") {
    dp::BatchNormPlan<Impl>().plan(impl, a[0], a[1], a[2], a[3], a[4], true, 0.1, 1e-5);
  } else if (id == "batch_norm_bwd") {
    dp::BatchNormPlan<Impl> p;
    p.plan(impl, a[0], a[2], rnd({3}, DType::f32, 3), rnd({3}, DType::f32, 4), pos({3}), true, 0.1, 1e-5);
    p.plan_backward(a[1]);
  } else if (id == "relu") {
    dp::ReluPlan<Impl>().plan(impl, a[0]);
  } else if (id == "relu_bwd") {
    dp::ReluPlan<Impl> p;
    p.plan(impl, a[0]);
    p.plan_backward(a[1]);
  } else if (id == "max_pool2d") {
    dp::MaxPool2dPlan<Impl>().plan(impl, a[0], pp);
  } else if (id == "max_pool2d_bwd") {
    dp::MaxPool2dPlan<Impl> p;
    p.plan(impl, a[0], pp);
    p.plan_backward(a[2]);
  } else if (id == "avg_pool2d") {
    dp::AvgPool2dPlan<Impl>().plan(impl, a[0], pp);
  } else if (id == "avg_pool2d_bwd") {
    dp::AvgPool2dPlan<Impl> p;
    p.plan(impl, a[1], pp);
    p.plan_backward(a[0]);
  } else if (id == "global_avg_pool") {
    dp::GlobalAvgPoolPlan<Impl>().plan(impl, a[0]);
  } else if (id == "global_avg_pool_bwd") {
    dp::GlobalAvgPoolPlan<Impl> p;
    p.plan(impl, a[1]);
    p.plan_backward(a[0]);
  } else if (id == "linear") {
    dp::LinearPlan<Impl>().plan(impl, a[0], a[1], a[2]);
  } else if (id == "linear_bwd_data") {
    dp::LinearPlan<Impl> p;
    p.plan(impl, rnd({4, 5}), a[1], Tensor());
    p.plan_backward(a[0], /*need_dx=*/true);
  } else if (id == "linear_bwd_weight") {
    dp::LinearPlan<Impl> p;
    p.plan(impl, a[0], rnd({3, 5}, DType::f32, 2), Tensor());
    p.plan_backward(a[1], /*need_dx=*/false);
  } else if (id == "add") {
    dp::AddPlan<Impl>().plan(impl, a[0], a[1]);
  } else if (id == "dropout") {
    ops::direct::DropoutCounter counter;
    dp::DropoutPlan<Impl>().plan(impl, a[0], 0.3, &counter, 0);
  } else if (id == "softmax_xent") {
    dp::SoftmaxXentPlan<Impl>().plan(impl, a[0], a[1]);
  } else if (id == "bce_logits") {
    dp::BceLogitsPlan<Impl>().plan(impl, a[0], a[1]);
  } else if (id == "layer_norm") {
    dp::LayerNormPlan<Impl>().plan(impl, a[0], a[1], a[2], 1e-5);
  } else if (id == "layer_norm_bwd") {
    dp::LayerNormPlan<Impl> p;
    p.plan(impl, a[0], a[1], Tensor(), 1e-5);
    p.plan_backward(a[4], /*need_dx=*/true);
  } else if (id == "attention") {
    dp::AttentionPlan<Impl>().plan(impl, a[0], a[1], a[2], true, 0.5);
  } else if (id == "attention_bwd") {
    dp::AttentionPlan<Impl> p;
    p.plan(impl, a[0], a[1], a[2], true, 0.5);
    p.plan_backward(a[5]);
  } else if (id == "exp") {
    dp::UnaryPlan<Impl>().plan(impl, a[0], ops::UnaryFn::exp);
  } else if (id == "tanh_bwd") {
    dp::UnaryPlan<Impl> p;
    p.plan(impl, a[0], ops::UnaryFn::tanh);
    p.plan_backward(a[2]);
  } else if (id == "sum_dims") {
    const int dims[] = {1};
    dp::ReducePlan<Impl>().plan(impl, ops::ReduceFn::sum, a[0], dims);
  } else if (id == "bmm") {
    dp::BmmPlan<Impl>().plan(impl, a[0], a[1]);
  } else if (id == "index_select") {
    dp::IndexSelectPlan<Impl>().plan(impl, a[0], 0, a[1]);
  } else if (id == "index_add") {
    dp::IndexAddPlan<Impl>().plan(impl, a[0], 0, a[1], {5, 3});
  } else {
    FAIL() << "no plan for case " << id;
  }
}

// The message of the strata::Error that fn throws; a test failure if it throws none.
template <class Fn>
std::string error_of(Fn&& fn, const std::string& what) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw a " << typeid(e).name() << ", not strata::Error: " << e.what();
    return {};
  }
  ADD_FAILURE() << what << " was accepted";
  return {};
}

// Every defect of every argument a plan takes, on backend Impl: the plan rejects it
// with the front end's message. Returns the number of defects checked.
template <class Impl>
int check_direct(const OpCase& c, const std::vector<std::string>& names) {
  if constexpr (Impl::kDevice != DeviceType::cpu) {
    return 0;
  } else {
    if (Impl::kName == "null" || backends::registry().find(Impl::kName) == nullptr) return 0;
    SCOPED_TRACE("direct mode on backend " + std::string(Impl::kName) + ", op " + c.op);
    Impl& impl = backends::registry().impl<Impl>();
    const D d(backends::registry().get(Impl::kName));
    const std::vector<Tensor> valid = valid_args(c);
    EXPECT_NO_THROW(plan_case(c.id, impl, valid)) << "the valid plan fails";
    int checked = 0;
    for (size_t i = 0; i < c.args.size(); ++i) {
      const Arg& a = c.args[i];
      if (std::find(names.begin(), names.end(), a.name) == names.end()) continue;
      for (unsigned defect : {kRank, kSizes, kDtype, kDevice, kUndefined}) {
        if (!(a.rejects & defect)) continue;
        std::vector<Tensor> args = valid;
        args[i] = with_defect(a, defect);
        const std::string what = defect_name(defect) + " for '" + a.name + "' (" + args[i].str() + ")";
        const std::string front = error_of([&] { run(c, d, args); }, "front end: " + what);
        const std::string direct = error_of([&] { plan_case(c.id, impl, args); }, "direct plan: " + what);
        EXPECT_EQ(direct, front) << what;
        ++checked;
      }
    }
    return checked;
  }
}

class BadInputMatrixDirect : public ::testing::TestWithParam<std::string> {};

TEST_P(BadInputMatrixDirect, EveryDefectGetsTheFrontEndsMessage) {
  const OpCase c = case_by_id(GetParam());
  ASSERT_FALSE(c.id.empty()) << "no case " << GetParam();
  const std::vector<std::string> names = direct_args(c.id);
  int checked = 0;
#define STRATA_CHECK_DIRECT(Impl) checked += check_direct<Impl>(c, names);
  STRATA_FOR_EACH_BACKEND(STRATA_CHECK_DIRECT)
#undef STRATA_CHECK_DIRECT
  std::printf("%s: %d defects rejected alike in direct mode\n", c.id.c_str(), checked);
  EXPECT_GT(checked, 0) << "no CPU backend or no defect of a plan's argument was checked";
}

// The cases that have a direct-mode plan.
std::vector<std::string> direct_case_ids() {
  std::vector<std::string> ids;
  for (const std::string& id : kCaseIds)
    if (!direct_args(id).empty()) ids.push_back(id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Ops, BadInputMatrixDirect, ::testing::ValuesIn(direct_case_ids()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace strata::testing
