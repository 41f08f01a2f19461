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
#include <cstdlib>
#include <optional>

#include "strata/core/exit_status.h"
#include "examples/train/options.h"
#include "examples/train/trace_file.h"
#include "examples/train/trainer.h"
#if STRATA_HAVE_DIST
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/dist/launcher.h"
#include "strata/dist/rank_env.h"
#endif

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
#if STRATA_HAVE_DIST
  std::optional<strata::dist::RankInfo> rank;
  try {
    rank = strata::dist::rank_from_env();
    // Before anything touches CUDA: the cuda backend runs on the first visible GPU.
    if (rank && rank->world > 1) {
      rank_prefix = "rank " + std::to_string(rank->rank) + ": ";
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      setenv("CUDA_VISIBLE_DEVICES", strata::dist::device_for_rank(*rank, visible).c_str(), 1);
    }
  } catch (const std::exception& e) {
    return fail(e, strata::kExitUsage);
  }
#endif
  try {
    cfg = resolve(opts);
#if STRATA_HAVE_DIST
    if (rank) {
      if (rank->world > 1)
        STRATA_CHECK(strata::backends::registry().get(cfg.o.backend).device_type() == strata::DeviceType::cuda,
                     "data-parallel training (", rank->source, ": world size ", rank->world,
                     ") runs one process per GPU on the cuda backend, not on '", cfg.o.backend, "' (add --backend cuda)");
      cfg.rank = rank->rank, cfg.world = rank->world, cfg.local_rank = rank->local_rank,
      cfg.local_world = rank->local_world;
    } else if (cfg.o.nproc > 1) {
      strata::dist::check_nproc(cfg.o.nproc, strata::backends::cuda::device_count(),
                                strata::backends::cuda::unavailable_reason());
    }
#else
    STRATA_CHECK(opts.nproc == 1, "--nproc ", opts.nproc, ": this build has no data-parallel training (dist/ is built "
                 "with the cuda backend and NCCL)");
#endif
  } catch (const std::exception& e) {
    return fail(e, strata::kExitUsage);
  }
#if STRATA_HAVE_DIST
  if (!rank && cfg.o.nproc > 1) {
    try {
      std::vector<std::string> args{strata::dist::self_executable()};
      for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
      const strata::dist::LaunchResult r = strata::dist::launch(strata::dist::strip_nproc(args), cfg.o.nproc);
      if (r.status != 0) std::fprintf(stderr, "strata_train: error: %s\n", r.message.c_str());
      return r.status == 0 ? strata::kExitSuccess : strata::kExitFailure;
    } catch (const std::exception& e) {
      return fail(e, strata::kExitFailure);
    }
  }
#endif
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
