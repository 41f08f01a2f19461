// The smallest end-to-end strata program with options: a two-layer net (linear ->
// relu -> linear -> softmax cross-entropy) trained with SGD on generated data, in any
// dispatch mode on any backend (the best available unless --backend names one). The
// labels come from a random linear "teacher", so the loss must fall well below
// log(classes). docs/library.md walks through the same API.
#include <CLI/CLI.hpp>
#include <strata/strata.h>

#include <chrono>
#include <cstdio>

#include "strata/core/exit_status.h"
#include "strata/core/version.h"

using namespace strata;

namespace {

// Labels of x [n, in]: the argmax over classes of x times a random teacher [in, classes].
Tensor teacher_labels(const Tensor& x, int64_t classes, Generator& gen) {
  const int64_t n = x.size(0), in = x.size(1);
  const auto xv = x.to_vector<float>(), tv = randn({in, classes}, gen).to_vector<float>();
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float best = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) {
      float s = 0;
      for (int64_t k = 0; k < in; ++k)
        s += xv[static_cast<size_t>(i * in + k)] * tv[static_cast<size_t>(k * classes + c)];
      if (s > best) best = s, labels[static_cast<size_t>(i)] = c;
    }
  }
  return from_vector(labels);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata demo: a two-layer net trained on generated data"};
  std::string backend, dispatch = "virtual";
  int steps = 200;
  double lr = 0.5;
  uint64_t seed = 1;
  app.add_option("--backend", backend, "backend name (default: the best available)");
  app.add_option("--dispatch", dispatch,
                 "virtual | static | direct | graph (graph: the cuda backend captures each step into a CUDA graph and "
                 "replays it)")
      ->capture_default_str();
  app.add_option("--steps", steps, "SGD steps")->capture_default_str()->check(CLI::Range(10, 1000000));
  app.add_option("--lr", lr, "learning rate")->capture_default_str();
  app.add_option("--seed", seed, "data and init seed")->capture_default_str();
  app.set_version_flag("--version", version_line("strata_demo"));
  STRATA_CLI11_PARSE(app, argc, argv);
  try {
    Generator gen(seed);
    const Tensor x = randn({256, 16}, gen);
    const Tensor labels = teacher_labels(x, 4, gen);
    manual_seed(seed);  // the layers' initial values
    auto model = nn::make_model(
        [](const auto& p) { return nn::sequential(nn::linear(p, 16, 32), nn::relu(p), nn::linear(p, 32, 4)); },
        ops::parse_dispatch_mode(dispatch), backend);
    std::printf("strata demo: %s\nbackends: %s\n", model->describe().c_str(),
                backends::registry().describe_usable().c_str());
    auto opt = model->make_optimizer({.lr = lr});
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 0; step < steps; ++step) {
      const double loss = model->train_step(x, labels, *opt).loss.item();
      if (step % (steps / 10) == 0 || step == steps - 1) std::printf("step %4d  loss %.4f\n", step, loss);
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("done in %.1f ms\n", ms);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
