// strata_gpt: trains a small GPT (nn::make_gpt) on a text corpus with the byte-level tokenizer or
// GPT-2's byte-pair one, through nn::Model in any dispatch mode, prints the training and held-out
// losses as it goes, then samples a continuation of a prompt.
//   strata_gpt --data docs --suffix .md --steps 300 --layers 2 --heads 4 --embd 64 --block 64 --prompt "The"
//   strata_gpt --data docs --suffix .md --tokenizer gpt2 --bpe-dir DIR/package   (tools/get-data.sh gpt2-bpe DIR)
//   strata_gpt --data docs --suffix .md --checkpoint runs/gpt.safetensors --metrics runs/gpt.jsonl
//   strata_gpt --data docs --suffix .md --resume runs/gpt.safetensors --sample 400   # sample from a checkpoint
// The options and conventions are strata_train's (--dispatch, --precision, --checkpoint, --resume,
// --metrics, --stop-after-steps, --threads, --nproc): examples/gpt/gpt_options.h; the run,
// its recipe and its exact resume: examples/gpt/gpt_trainer.h.
//
// stdout is the run's log; the progress bar, warnings and notes go to stderr.
// Exit status (core/exit_status.h): 0 done, 1 a runtime error or a finished run whose last loss is
// not below its first (a run that does not learn), 2 a usage error (a bad command line, or
// options this build cannot honour).
// Data parallel (builds with dist/): `--nproc N` starts N copies of this program, one per GPU:
//   ./build/bin/strata_gpt --backend cuda --data docs --suffix .md --nproc 2
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "examples/gpt/gpt_options.h"
#include "examples/gpt/gpt_trainer.h"
#include "examples/train/data_parallel_start.h"
#include "examples/train/options.h"
#include "examples/train/trace_file.h"
#include "strata/core/exit_status.h"

namespace {
std::string rank_prefix;  // "rank 1: " in a data-parallel run

int fail(const std::exception& e, int status) {
  std::fflush(stdout);
  std::fprintf(stderr, "strata_gpt: %serror: %s\n", rank_prefix.c_str(), e.what());
  if (status != strata::kExitUsage) strata::train::write_trace_file("strata_gpt", stderr);
  return status;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace strata;
  gpt::GptOptions opts;
  auto app = gpt::make_gpt_cli(opts);
  STRATA_CLI11_PARSE(*app, argc, argv);
  train::apply_thread_count(opts.threads, argv);
  std::optional<train::DataParallelStart> dp;
  gpt::GptRunConfig cfg;
  try {
    dp.emplace();
    rank_prefix = dp->prefix();
    cfg = gpt::resolve_gpt(opts);
    dp->check(cfg.o.backend, cfg.o.nproc);
    const train::RankPlace r = dp->place();
    cfg.rank = r.rank, cfg.world = r.world, cfg.local_rank = r.local_rank, cfg.local_world = r.local_world;
  } catch (const std::exception& e) {
    return fail(e, kExitUsage);
  }
  if (dp->launches(cfg.o.nproc)) {
    try {
      return dp->launch(argc, argv, cfg.o.nproc, "strata_gpt");
    } catch (const std::exception& e) {
      return fail(e, kExitFailure);
    }
  }
  try {
    gpt::GptTrainer trainer(cfg, stdout, stderr, stderr);
    const gpt::GptRunResult r = trainer.run();
    if (const std::string s = trainer.sample(); !s.empty()) std::printf("sample: %s\n", s.c_str());
    train::write_trace_file("strata_gpt", stderr);
    if (r.losses.empty()) return kExitSuccess;
    std::printf("loss %.4f -> %.4f\n", r.losses.front(), r.losses.back());
    std::fflush(stdout);
    if (!r.interrupted && r.losses.size() >= 2 && !(r.losses.back() < r.losses.front())) {
      std::fprintf(stderr, "strata_gpt: the last step's loss is not below the first: the model did not learn\n");
      return kExitFailure;
    }
    return kExitSuccess;
  } catch (const train::UsageError& e) {
    return fail(e, kExitUsage);
  } catch (const std::exception& e) {
    return fail(e, kExitFailure);
  }
}
