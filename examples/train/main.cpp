// strata_train: one trainer for every dataset preset (examples/train/presets.h).
//
//   ./build/bin/strata_train                       # LeNet, Fashion-MNIST, 3 epochs, best CPU backend
//   ./build/bin/strata_train --model resnet18 --epochs 10 --checkpoint runs/r18.safetensors
//   ./build/bin/strata_train --model resnet18 --epochs 10 --checkpoint runs/r18.safetensors
//       --resume runs/r18.safetensors        # continue exactly where it stopped
//
// stdout is the run's log (its first lines name the backend, dispatch mode,
// precision, init policy, seed and dataset sizes); the progress bar goes to stderr.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "examples/train/options.h"
#include "examples/train/trainer.h"

int main(int argc, char** argv) {
  using namespace strata::train;
  TrainOptions opts;
  auto app = make_cli(opts);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app->exit(e);
  }
  apply_thread_count(opts.threads, argv);
  try {
    const RunConfig cfg = resolve(opts);
    Trainer trainer(cfg, stdout, stderr);
    trainer.run();
    return 0;
  } catch (const strata::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "strata_train: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "strata_train: error: %s\n", e.what());
    return 1;
  }
}
