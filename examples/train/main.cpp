// strata_train: one trainer for every dataset preset (examples/train/presets.h).
//
//   ./build/bin/strata_train                       # LeNet, Fashion-MNIST, 3 epochs, best CPU backend
//   ./build/bin/strata_train --model resnet18 --epochs 10 --checkpoint runs/r18.safetensors
//   ./build/bin/strata_train --model resnet18 --epochs 10 --checkpoint runs/r18.safetensors
//       --resume runs/r18.safetensors        # continue exactly where it stopped
//
// stdout is the run's log (its first lines name the backend, dispatch mode,
// precision, init policy, seed and dataset sizes); the progress bar, warnings and
// notes about the run's surroundings (a resume with other options, a stale lock taken
// over) go to stderr.
// Exit status (core/exit_status.h): 0 done, 1 a runtime error, 2 a usage error (a bad
// command line, or options this build cannot honour, found before any data is read).
// STRATA_TRACE=1 writes the op trace when it ends (examples/train/trace_file.h).
//
// Data parallel (builds with dist/): `--nproc N` starts N copies of this program, one
// per GPU, and waits for them (dist/launcher.h); a copy started so, or by torchrun or
// mpirun, finds its rank in the environment (dist/rank_env.h).
//   ./build/bin/strata_train --backend cuda --model resnet18 --nproc 2
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "strata/core/exit_status.h"
#include "examples/train/data_parallel_start.h"
#include "examples/train/options.h"
#include "examples/train/trace_file.h"
#include "examples/train/trainer.h"

namespace {
std::string rank_prefix;  // "rank 1: " in a data-parallel run

int fail(const std::exception& e, int status) {
  std::fflush(stdout);
  std::fprintf(stderr, "strata_train: %serror: %s\n", rank_prefix.c_str(), e.what());
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
  std::optional<DataParallelStart> dp;
  try {
    dp.emplace();
    rank_prefix = dp->prefix();
  } catch (const std::exception& e) {
    return fail(e, strata::kExitUsage);
  }
  try {
    cfg = resolve(opts);
    dp->check(cfg.o.backend, cfg.o.nproc);
    const RankPlace r = dp->place();
    cfg.rank = r.rank, cfg.world = r.world, cfg.local_rank = r.local_rank, cfg.local_world = r.local_world;
  } catch (const std::exception& e) {
    return fail(e, strata::kExitUsage);
  }
  if (dp->launches(cfg.o.nproc)) {
    try {
      return dp->launch(argc, argv, cfg.o.nproc, "strata_train");
    } catch (const std::exception& e) {
      return fail(e, strata::kExitFailure);
    }
  }
  try {
    Trainer trainer(cfg, stdout, stderr, stderr);
    trainer.run();
    write_trace_file("strata_train", stderr);
    return strata::kExitSuccess;
  } catch (const UsageError& e) {
    return fail(e, strata::kExitUsage);
  } catch (const std::exception& e) {
    return fail(e, strata::kExitFailure);
  }
}
