#pragma once
// The data-parallel start of a training program's main() (strata_train, strata_gpt): where this
// process stands among the ranks, and `--nproc N`'s launch of N copies of the program, one per GPU.
// In a build without dist/ (no cuda backend or no NCCL) every process is a world of one, and
// --nproc above 1 is a usage error naming the option and its value.
//
//   DataParallelStart dp;                        // before anything touches CUDA
//   ... resolve the options ...
//   dp.check("strata_gpt", backend, nproc);      // usage errors
//   if (dp.launches(nproc)) return dp.launch(argc, argv, nproc, "strata_gpt");
//   ... train as rank dp.place().rank of dp.place().world ...
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
}
namespace strata::nn {
class Model;
}
namespace strata::dist {
class ProcessGroup;
class DataParallel;
}  // namespace strata::dist

namespace strata::train {

struct RankPlace {
  int rank = 0, world = 1, local_rank = 0, local_world = 1;
};

class DataParallelStart {
 public:
  // Reads the launcher's environment (torchrun's RANK/WORLD_SIZE, mpirun's, or --nproc's own) and,
  // in a rank of a world of more than one, makes the rank's GPU the first visible one (the cuda
  // backend runs on it). Throws strata::Error for an environment that names no valid rank.
  DataParallelStart();

  // "rank 1: " in a rank of a world of more than one, "" otherwise (for error messages).
  const std::string& prefix() const { return prefix_; }
  RankPlace place() const { return place_; }
  // After the options are resolved (throws strata::Error naming the option and value): a rank of a
  // world of more than one runs on the cuda backend; outside a launcher, --nproc N > 1 needs a
  // build with dist/ and N GPUs.
  void check(const std::string& backend, int nproc) const;
  // Whether this process starts the ranks itself (--nproc > 1 and not a rank already).
  bool launches(int nproc) const { return !is_rank_ && nproc > 1; }
  // Runs nproc copies of this program (argv less --nproc) and waits for them; the exit status
  // (errors are reported on stderr prefixed with `program`).
  int launch(int argc, char** argv, int nproc, const char* program) const;

 private:
  RankPlace place_;
  bool is_rank_ = false;    // started by a launcher (whatever the world size)
  std::string source_;      // which variables said so
  std::string prefix_;
};

// `--grad-exchange bf16|f16` on a trainer's command line: the value DataParallelRun takes.
void add_grad_exchange_option(CLI::App& app, std::string& value);

// The data-parallel side of a run in a rank of a world of more than one: the process group and the
// model's gradient averaging (dist/data_parallel.h), which installs the model's gradient hook. In a
// world of one it holds nothing and sums are the values themselves.
class DataParallelRun {
 public:
  // grad_exchange: the dtype the gradients cross the links in ("" the parameters', "bf16", "f16":
  // dist::DataParallelOptions::exchange_dtype).
  DataParallelRun(nn::Model& model, RankPlace place, double timeout_seconds, bool sync_batch_norm,
                  const std::string& grad_exchange = "");
  ~DataParallelRun();
  bool active() const { return ddp_ != nullptr; }
  // The element-wise sum over the ranks (collective).
  std::vector<double> sum(std::vector<double> v) const;
  // What the gradient hook it installs runs: for a program that installs a hook of its own
  // (strata_gpt's clipping) and calls this first.
  void average_gradients();
  // "data parallel: ..." for the log (empty in a world of one).
  std::string describe() const;

 private:
  std::unique_ptr<dist::ProcessGroup> pg_;
  std::unique_ptr<dist::DataParallel> ddp_;
};

}  // namespace strata::train
