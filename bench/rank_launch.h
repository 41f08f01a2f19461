#pragma once
// How the data-parallel benchmarks (dist_resnet, gpt2_dist) start: as one rank of a world that a
// launcher set up (rank_from_env: strata's own, torchrun's or mpirun's variables), or, asked for
// --nproc N > 1 with none set, by starting N copies of this program, one per GPU; and the option
// both take for the dtype of the exchange.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "strata/backends/cuda/cuda_backend.h"
#include "strata/core/exit_status.h"
#include "strata/dist/launcher.h"
#include "strata/dist/rank_env.h"

namespace strata::bench {

// --grad-exchange bf16|f16 (dist::exchange_dtype_from_name).
inline void add_grad_exchange_option(CLI::App& app, std::string& value) {
  app.add_option("--grad-exchange", value,
                 "the dtype the gradients cross the links in: bf16 or f16 halve the bytes (PyTorch DDP's "
                 "bf16_compress_hook); default the parameters'")
      ->check(CLI::IsMember({"bf16", "f16"}));
}

// run(rank) in this process, or the launch of nproc copies; the program's exit status. Errors are
// printed as "<program>: error: ...".
template <class Run>
int run_as_ranks(int argc, char** argv, int nproc, const char* program, Run&& run) {
  try {
    std::optional<dist::RankInfo> info = dist::rank_from_env();
    if (!info && nproc > 1) {
      dist::check_nproc(nproc, backends::cuda::device_count(), backends::cuda::unavailable_reason());
      std::vector<std::string> args{dist::self_executable()};
      for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
      const dist::LaunchResult r = dist::launch(dist::strip_nproc(args), nproc);
      if (r.status != 0) std::fprintf(stderr, "%s: error: %s\n", program, r.message.c_str());
      return r.status;
    }
    const dist::RankInfo me = info.value_or(dist::RankInfo{});
    if (me.world > 1)
      setenv("CUDA_VISIBLE_DEVICES", dist::device_for_rank(me, std::getenv("CUDA_VISIBLE_DEVICES")).c_str(), 1);
    return run(me);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return kExitFailure;
  }
}

}  // namespace strata::bench
