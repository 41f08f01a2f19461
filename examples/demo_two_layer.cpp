// The smallest end-to-end strata program: a two-layer net (linear -> relu ->
// linear -> softmax cross-entropy) trained with SGD on generated data, in any
// dispatch mode on any CPU backend. The data come from a random "teacher" net, so
// the loss must fall well below log(classes).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "backends/api/registry.h"
#include "core/exit_status.h"
#include "core/version.h"
#include "ops/direct/plans.h"
#include "ops/dispatch.h"
#include "strata_generated/static_backends.h"

using namespace strata;

namespace {

struct Problem {
  Tensor x, labels;
  Tensor w1, b1, w2, b2;  // student parameters
};

Problem make_problem(int64_t n, int64_t in, int64_t hidden, int64_t classes, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto randn = [&](const Shape& s, float scale) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& f : v) f = normal(gen) * scale;
    return Tensor::from_vector(v, s);
  };
  Problem p;
  p.x = randn({n, in}, 1.f);
  const Tensor teacher = randn({classes, in}, 1.f);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  const float* x = p.x.data<float>();
  const float* t = teacher.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    float best_v = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) {
      float s = 0;
      for (int64_t k = 0; k < in; ++k) s += x[i * in + k] * t[c * in + k];
      if (s > best_v) best_v = s, best = c;
    }
    labels[static_cast<size_t>(i)] = best;
  }
  p.labels = Tensor::from_vector(labels, {n});
  p.w1 = randn({hidden, in}, 1.f / std::sqrt(static_cast<float>(in)));
  p.b1 = randn({hidden}, 0.f);
  p.w2 = randn({classes, hidden}, 1.f / std::sqrt(static_cast<float>(hidden)));
  p.b2 = randn({classes}, 0.f);
  return p;
}

template <class D>
void train_tape(const D& d, Problem p, int steps, double lr) {
  for (Tensor* t : {&p.w1, &p.b1, &p.w2, &p.b2}) t->set_requires_grad(true);
  for (int step = 0; step <= steps; ++step) {
    Tensor h = autograd::relu(d, autograd::linear(d, p.x, p.w1, p.b1));
    Tensor loss = autograd::softmax_xent(d, autograd::linear(d, h, p.w2, p.b2), p.labels);
    if (step % (steps / 10) == 0) std::printf("step %4d  loss %.4f\n", step, loss.item());
    if (step == steps) break;
    autograd::backward(loss);
    autograd::NoGradGuard no_grad;
    for (Tensor* t : {&p.w1, &p.b1, &p.w2, &p.b2}) {
      ops::sgd_step_(d, *t, t->grad(), Tensor(), ops::SgdOptions{lr, 0.0, 0.0, false});
      t->set_grad(Tensor());
    }
  }
}

template <class Impl>
void train_direct(Impl& impl, Problem p, int steps, double lr) {
  namespace dp = ops::direct;
  dp::LinearPlan<Impl> fc1, fc2;
  dp::ReluPlan<Impl> relu;
  dp::SoftmaxXentPlan<Impl> loss;
  fc1.plan(impl, p.x, p.w1, p.b1);
  relu.plan(impl, fc1.y);
  fc2.plan(impl, relu.y, p.w2, p.b2);
  loss.plan(impl, fc2.y, p.labels);
  fc2.plan_backward(loss.dlogits, true);
  relu.plan_backward(fc2.dx);
  fc1.plan_backward(relu.dx, false);
  const ops::SgdStepArgs updates[] = {{p.w1, fc1.dw, {}, lr}, {p.b1, fc1.db, {}, lr}, {p.w2, fc2.dw, {}, lr},
                                 {p.b2, fc2.db, {}, lr}};
  for (int step = 0; step <= steps; ++step) {
    fc1.forward();
    relu.forward();
    fc2.forward();
    loss.forward();
    if (step % (steps / 10) == 0) std::printf("step %4d  loss %.4f\n", step, loss.loss.item());
    if (step == steps) break;
    loss.backward();
    fc2.backward();
    relu.backward();
    fc1.backward();
    for (const auto& u : updates) impl.sgd_step(u);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata demo: a two-layer net trained on generated data"};
  std::string backend = "reference", dispatch = "virtual";
  int steps = 200;
  double lr = 0.5;
  uint64_t seed = 1;
  app.add_option("--backend", backend, "backend name")->capture_default_str();
  app.add_option("--dispatch", dispatch, "virtual | static | direct")->capture_default_str();
  app.add_option("--steps", steps, "SGD steps")->capture_default_str()->check(CLI::Range(10, 1000000));
  app.add_option("--lr", lr, "learning rate")->capture_default_str();
  app.add_option("--seed", seed, "data and init seed")->capture_default_str();
  app.set_version_flag("--version", version_line("strata_demo"));
  STRATA_CLI11_PARSE(app, argc, argv);
  try {
    const ops::DispatchMode mode = ops::parse_dispatch_mode(dispatch);
    backends::Backend& b = backends::registry().get(backend);
    std::printf("strata demo: backend %s, dispatch %s, backends built: %s\n", backend.c_str(), dispatch.c_str(),
                backends::registry().describe().c_str());
    const Problem p = make_problem(256, 16, 32, 4, seed);
    const auto t0 = std::chrono::steady_clock::now();
    bool ran = false;
    if (mode == ops::DispatchMode::virtual_call) {
      train_tape(ops::VirtualDispatch(b), p, steps, lr);
      ran = true;
    }
#define STRATA_DEMO_RUN(Impl)                                                            \
  if (!ran && b.name() == Impl::kName) {                                                 \
    auto& impl = backends::registry().impl<Impl>();                                      \
    if (mode == ops::DispatchMode::static_call) train_tape(ops::StaticDispatch<Impl>(impl), p, steps, lr); \
    else train_direct(impl, p, steps, lr);                                               \
    ran = true;                                                                          \
  }
    STRATA_FOR_EACH_BACKEND(STRATA_DEMO_RUN)
#undef STRATA_DEMO_RUN
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("done in %.1f ms\n", ms);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
