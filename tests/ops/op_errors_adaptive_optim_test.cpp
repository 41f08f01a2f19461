// RMSprop, Adagrad and Adadelta's front end: each option out of torch.optim's range and
// each operand defect is a strata::Error naming the op and the argument (a list's entry by
// its index); a refused call writes nothing; a taken one reports its write.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "support/op_fixtures.h"

namespace strata::testing {
namespace {

STRATA_COVERS(rmsprop_step, "errors");
STRATA_COVERS(adagrad_step, "errors");
STRATA_COVERS(adadelta_step, "errors");
STRATA_COVERS(multi_rmsprop_step, "errors");
STRATA_COVERS(multi_adagrad_step, "errors");
STRATA_COVERS(multi_adadelta_step, "errors");

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(OpErrors, RmspropOptionsAndOperands) {
  auto d = reference_dispatch();
  const Tensor p = rnd({5}), g = rnd({5}), sq = rnd({5}), buf = rnd({5}), avg = rnd({5});
  const auto step = [&](ops::RmspropOptions o) { ops::rmsprop_step_(d, p, g, sq, buf, avg, o); };
  const auto with = [](auto set) {
    ops::RmspropOptions o;
    set(o);
    return o;
  };
  EXPECT_STRATA_ERROR(step(with([](auto& o) { o.lr = -0.01; })), "rmsprop_step", "lr", ">= 0", "-0.01");
  EXPECT_STRATA_ERROR(step(with([](auto& o) { o.lr = kNan; })), "rmsprop_step", "lr", "finite");
  EXPECT_STRATA_ERROR(step(with([](auto& o) { o.eps = -1e-8; })), "rmsprop_step", "eps");
  EXPECT_STRATA_ERROR(step(with([](auto& o) { o.weight_decay = -1; })), "rmsprop_step", "weight_decay");
  EXPECT_STRATA_ERROR(step(with([](auto& o) { o.momentum = -0.9; })), "rmsprop_step", "momentum");
  EXPECT_STRATA_ERROR(step(with([](auto& o) { o.alpha = 1.0; })), "rmsprop_step", "alpha", "[0, 1)");
  EXPECT_STRATA_ERROR(step(with([](auto& o) { o.alpha = -0.5; })), "rmsprop_step", "alpha", "[0, 1)");
  EXPECT_STRATA_ERROR(step(with([](auto& o) { o.alpha = kNan; })), "rmsprop_step", "alpha");
  ops::RmspropOptions both;
  both.momentum = 0.9, both.centered = true;
  EXPECT_STRATA_ERROR(ops::rmsprop_step_(d, p, g, sq, Tensor(), avg, both), "rmsprop_step", "momentum_buf");
  EXPECT_STRATA_ERROR(ops::rmsprop_step_(d, p, g, sq, buf, rnd({6}), both), "rmsprop_step", "grad_avg", "shape");
  EXPECT_STRATA_ERROR(ops::rmsprop_step_(d, p, g, rnd({5}, DType::f64), buf, avg, both), "rmsprop_step",
                      "square_avg", "dtype");
  EXPECT_STRATA_ERROR(ops::rmsprop_step_(d, rnd({5}, DType::f64), g, sq, buf, avg, both), "rmsprop_step", "dtype");
  EXPECT_STRATA_ERROR(ops::rmsprop_step_(d, fake_cuda({5}), fake_cuda({5}), fake_cuda({5}), Tensor(), Tensor(), {}),
                      "rmsprop_step", "param", "cuda:0");
  // Without momentum and centering the two are not read: undefined is fine.
  EXPECT_NO_THROW(ops::rmsprop_step_(d, p, g, sq, Tensor(), Tensor(), {}));
  const std::vector<Tensor> ps{rnd({5}), rnd({3})}, gs{rnd({5}), rnd({3})}, ss{rnd({5}), rnd({3})};
  EXPECT_STRATA_ERROR(ops::multi_rmsprop_step_(d, ps, gs, ss, std::vector<Tensor>{}, ss, both), "multi_rmsprop_step",
                      "momentum_bufs", "momentum is not 0", "0 entries");
  EXPECT_STRATA_ERROR(ops::multi_rmsprop_step_(d, ps, gs, ss, ss, std::vector<Tensor>{ss[0]}, both),
                      "multi_rmsprop_step", "grad_avgs", "centered", "1 entries");
  EXPECT_STRATA_ERROR(ops::multi_rmsprop_step_(d, ps, gs, std::vector<Tensor>{ss[0], rnd({4})}, {}, {}, {}),
                      "multi_rmsprop_step", "square_avgs[1]", "shape");
  EXPECT_STRATA_ERROR(ops::multi_rmsprop_step_(d, ps, gs, ss, {}, {}, with([](auto& o) { o.alpha = 2; })),
                      "multi_rmsprop_step", "alpha");
}

TEST(OpErrors, AdagradOptionsAndOperands) {
  auto d = reference_dispatch();
  const Tensor p = rnd({5}), g = rnd({5}), sum = rnd({5});
  const auto step = [&](ops::AdagradOptions o, int64_t t = 1) { ops::adagrad_step_(d, p, g, sum, o, t); };
  ops::AdagradOptions o;
  o.lr = -1;
  EXPECT_STRATA_ERROR(step(o), "adagrad_step", "lr");
  o = {}, o.lr_decay = -0.1;
  EXPECT_STRATA_ERROR(step(o), "adagrad_step", "lr_decay");
  o = {}, o.weight_decay = kInf;
  EXPECT_STRATA_ERROR(step(o), "adagrad_step", "weight_decay", "finite");
  o = {}, o.eps = -1e-10;
  EXPECT_STRATA_ERROR(step(o), "adagrad_step", "eps");
  EXPECT_STRATA_ERROR(step({}, 0), "adagrad_step", "step", ">= 1");
  EXPECT_STRATA_ERROR(ops::adagrad_step_(d, p, g, Tensor(), {}, 1), "adagrad_step", "sum");
  EXPECT_STRATA_ERROR(ops::adagrad_step_(d, p, rnd({4}), sum, {}, 1), "adagrad_step", "grad", "shape");
  const std::vector<Tensor> ps{rnd({5}), rnd({3})}, gs{rnd({5}), rnd({3})};
  EXPECT_STRATA_ERROR(ops::multi_adagrad_step_(d, ps, gs, gs, std::vector<int64_t>{1}, {}), "multi_adagrad_step",
                      "steps", "1 entries");
  EXPECT_STRATA_ERROR(ops::multi_adagrad_step_(d, ps, gs, gs, std::vector<int64_t>{1, 0}, {}), "multi_adagrad_step",
                      "steps[1]");
  EXPECT_STRATA_ERROR(ops::multi_adagrad_step_(d, ps, gs, std::vector<Tensor>{gs[0]}, std::vector<int64_t>{1, 1}, {}),
                      "multi_adagrad_step", "sums", "1 entries");
}

TEST(OpErrors, AdadeltaOptionsAndOperands) {
  auto d = reference_dispatch();
  const Tensor p = rnd({5}), g = rnd({5}), sq = rnd({5}), acc = rnd({5});
  const auto step = [&](ops::AdadeltaOptions o) { ops::adadelta_step_(d, p, g, sq, acc, o); };
  ops::AdadeltaOptions o;
  o.lr = -1;
  EXPECT_STRATA_ERROR(step(o), "adadelta_step", "lr");
  o = {}, o.rho = 1.5;
  EXPECT_STRATA_ERROR(step(o), "adadelta_step", "rho", "[0, 1]");
  o = {}, o.rho = -0.1;
  EXPECT_STRATA_ERROR(step(o), "adadelta_step", "rho");
  o = {}, o.eps = -1e-6;
  EXPECT_STRATA_ERROR(step(o), "adadelta_step", "eps");
  o = {}, o.weight_decay = -1;
  EXPECT_STRATA_ERROR(step(o), "adadelta_step", "weight_decay");
  o = {}, o.rho = 1.0;  // torch.optim.Adadelta accepts rho = 1 (the averages stay where they start)
  EXPECT_NO_THROW(step(o));
  EXPECT_STRATA_ERROR(ops::adadelta_step_(d, p, g, sq, rnd({5}, DType::f64), {}), "adadelta_step", "acc_delta",
                      "dtype");
  const std::vector<Tensor> ps{rnd({5}), rnd({3})}, gs{rnd({5}), rnd({3})};
  EXPECT_STRATA_ERROR(ops::multi_adadelta_step_(d, ps, gs, gs, std::vector<Tensor>{gs[0], Tensor()}, {}),
                      "multi_adadelta_step", "acc_deltas[1]");
  const std::vector<Tensor> on_gpu{fake_cuda({5})};
  EXPECT_STRATA_ERROR(ops::multi_adadelta_step_(d, on_gpu, on_gpu, on_gpu, on_gpu, {}), "multi_adadelta_step",
                      "params[0]", "cuda:0");
}

// A refused call writes nothing and reports no write; a taken one reports the parameter's.
TEST(InPlaceOps, AdaptiveStepsReportTheirWritesAndRefusalsDoNot) {
  auto d = reference_dispatch();
  // square averages and sums are >= 0 (a negative one would make the parameters NaN, and NaN != NaN)
  const Tensor p = rnd({5}), g = rnd({5}), s = random_tensor({5}, DType::f32, 8, 0.5, 1.5),
               a = random_tensor({5}, DType::f32, 9, 0.5, 1.5);
  const auto writes = [](const Tensor& t, auto&& call) {
    const uint64_t before = t.version();
    call();
    return t.version() - before;
  };
  EXPECT_EQ(writes(p, [&] { ops::rmsprop_step_(d, p, g, s, Tensor(), Tensor(), {}); }), 1u);
  EXPECT_EQ(writes(p, [&] { ops::adagrad_step_(d, p, g, s, {}, 1); }), 1u);
  EXPECT_EQ(writes(p, [&] { ops::adadelta_step_(d, p, g, s, a, {}); }), 1u);
  EXPECT_EQ(writes(g, [&] { ops::adadelta_step_(d, p, g, s, a, {}); }), 0u) << "gradients are only read";
  const std::vector<double> before = p.to_vector<double>();
  ops::AdadeltaOptions bad;
  bad.rho = 2;
  EXPECT_EQ(writes(p, [&] { EXPECT_STRATA_ERROR(ops::adadelta_step_(d, p, g, s, a, bad), "rho"); }), 0u);
  EXPECT_EQ(p.to_vector<double>(), before);
}

}  // namespace
}  // namespace strata::testing
