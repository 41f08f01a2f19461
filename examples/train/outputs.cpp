#include "examples/train/outputs.h"

#include "strata/core/error.h"
#include "examples/train/metrics.h"

namespace strata::train {

namespace fs = std::filesystem;

namespace {

void refuse_inputs(const std::string& option, const std::string& path, const std::vector<fs::path>& inputs) {
  for (const fs::path& in : inputs)
    STRATA_CHECK(!same_file(path, in), option, " ", quoted(path), " is an input of this run (the dataset file ",
                 quoted(in), "): writing it would destroy the data; choose another path");
}

}  // namespace

GuardedOutputs::GuardedOutputs(const TrainOptions& o, const std::vector<fs::path>& inputs, uint64_t checkpoint_bytes) {
  if (!o.checkpoint.empty()) refuse_inputs("--checkpoint", o.checkpoint, inputs);
  if (!o.metrics.empty()) {
    refuse_inputs("--metrics", o.metrics, inputs);
    STRATA_CHECK(o.resume.empty() || !same_file(o.metrics, o.resume), "--metrics ", quoted(o.metrics),
                 " is the checkpoint given to --resume: appending to it would destroy it; choose another path");
  }
  STRATA_CHECK(o.checkpoint.empty() || o.metrics.empty() || !same_file(o.checkpoint, o.metrics),
               "--checkpoint and --metrics both name ", quoted(o.checkpoint),
               ": one would overwrite the other; give them different paths");
  if (!o.checkpoint.empty()) check_output_file(o.checkpoint, checkpoint_bytes, "--checkpoint");
  if (!o.metrics.empty()) {
    check_output_file(o.metrics, 4096, "--metrics");
    check_appendable(o.metrics);
  }
  if (o.checkpoint.empty()) return;
  lock_ = std::make_unique<FileLock>(o.checkpoint, "--checkpoint");
  if (!lock_->stale_holder().empty())
    notes_.push_back("note: --checkpoint: took over the lock " + quoted(lock_->lock_path()) + " left by pid " +
                     lock_->stale_holder() + ", which no longer holds it (a run killed while writing)");
  // No other strata_train writes this checkpoint while the lock is held: a temporary
  // of a dead writer is stale however fresh.
  for (const fs::path& t : remove_stale_temporaries(o.checkpoint, std::chrono::seconds(0))) {
    const std::string name = t.filename().string();
    notes_.push_back("note: --checkpoint: removed " + quoted(t) + ", a partial write left by pid " +
                     name.substr(name.rfind('.') + 1) + ", which no longer runs");
  }
}

}  // namespace strata::train
