// strata_train: one trainer for every dataset preset (examples/train/presets.h).
//
//   ./build/bin/strata_train                       # LeNet, Fashion-MNIST, 3 epochs, best CPU backend
//   ./build/bin/strata_train --model resnet18 --epochs 10 --checkpoint runs/r18.safetensors
//   ./build/bin/strata_train --model resnet18 --epochs 10 --checkpoint runs/r18.safetensors
//       --resume runs/r18.safetensors        # continue exactly where it stopped
//
// stdout is the run's log (its first lines name the backend, dispatch mode,
// precision, init policy, seed and dataset sizes); the progress bar goes to stderr.
// Exit status (core/exit_status.h): 0 done, 1 a runtime error, 2 a usage error (a bad
// command line, or options this build cannot honour, found before any data is read).
// STRATA_TRACE=1 writes the op trace when it ends (examples/train/trace_file.h).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "strata/core/exit_status.h"
#include "examples/train/options.h"
#include "examples/train/trace_file.h"
#include "examples/train/trainer.h"

namespace {
int fail(const std::exception& e, int status) {
  std::fflush(stdout);
  std::fprintf(stderr, "strata_train: error: %s\n", e.what());
  if (status != strata::kExitUsage) strata::train::write_trace_file("strata_train", stderr);  // what ran until then
  return status;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace strata::train;
  TrainOptions opts;
  auto app = make_cli(opts);
  STRATA_CLI11_PARSE(*app, argc, argv);
  apply_thread_count(opts.threads, argv);
  RunConfig cfg;
  try {
    cfg = resolve(opts);
  } catch (const std::exception& e) {
    return fail(e, strata::kExitUsage);
  }
  try {
    Trainer trainer(cfg, stdout, stderr);
    trainer.run();
    write_trace_file("strata_train", stderr);
    return strata::kExitSuccess;
  } catch (const UsageError& e) {
    return fail(e, strata::kExitUsage);
  } catch (const std::exception& e) {
    return fail(e, strata::kExitFailure);
  }
}
