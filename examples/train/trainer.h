#pragma once
// The training loop of strata_train: epochs of train steps with a progress bar, an
// evaluation on the test split after each epoch (accuracy, or mAP for multi-label
// data), one JSON metrics line per epoch, a checkpoint after each epoch (and every N
// steps), and exact resume.
//
// Exact resume: a checkpoint holds the model (parameters and BN buffers), the
// optimizer state and step counts, and in its metadata the epoch, the number of
// batches done in it, the running sums of the epoch's train metrics and each Dropout
// module's (seed, offset). The data order of epoch e is a function of (seed, e)
// (data/loader.h), so the loader is repositioned by starting epoch e and skipping the
// batches already done; the learning rate is a function of the step (nn/schedule.h).
// A run resumed with the same options therefore produces bitwise the same weights
// and metrics as an uninterrupted run (tested on the reference backend).
//
// Data parallel (cfg.world > 1, one process per GPU): each rank trains on its shard of
// every epoch (data/loader.h) with --batch-size rows per step, gradients are averaged
// over the ranks (dist/data_parallel.h), the epoch's train and test metrics are sums
// over the ranks, and rank 0 alone logs, writes metrics and checkpoints (whose running
// sums are the ranks' total); every rank loads the checkpoint to resume, at the same
// world size.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "strata/data/loader.h"
#include "examples/train/data_parallel_start.h"
#include "examples/train/metrics.h"
#include "examples/train/options.h"
#include "examples/train/outputs.h"
#include "examples/train/presets.h"
#include "strata/nn/model.h"
#include "strata/nn/optim.h"
#include "strata/nn/schedule.h"

namespace strata::train {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;  // classification
  double map = 0;       // multi-label
  int64_t images = 0;
};

struct RunResult {
  std::vector<EpochMetrics> epochs;  // the epochs this call completed
  int64_t steps = 0;                 // optimizer steps after the run
  bool interrupted = false;          // stopped by --stop-after-steps
};

class Trainer {
 public:
  // Loads the data, builds the model and optimizer, and restores cfg.o.resume if set.
  // log: the run's log (stdout in strata_train; nullptr: silent); progress: where the
  // progress bar goes (stderr; nullptr: none); warnings: where warnings and notes about
  // the run's surroundings go (a resume whose options differ, a stale lock taken over:
  // stderr; nullptr: none).
  Trainer(const RunConfig& cfg, std::FILE* log, std::FILE* progress, std::FILE* warnings = nullptr);
  ~Trainer();

  // Trains up to cfg.o.epochs epochs (from the resumed position, if any). With
  // --stop-after-steps N it stops after N steps of this call (a stop on an epoch's last
  // step ends that epoch first: its evaluation, metrics and checkpoint); with
  // --checkpoint and no --checkpoint-every it saves the checkpoint at the stop.
  RunResult run();
  EvalResult evaluate();

  nn::Model& model() { return *model_; }
  nn::Optimizer& optimizer() { return *opt_; }
  const ModelSpec& spec() const { return spec_; }
  int64_t step() const { return step_; }
  int64_t steps_per_epoch() const { return train_loader_->batches_per_epoch(); }
  // The log's header lines (also printed by the constructor).
  const std::string& header() const { return header_; }
  const std::string& run_id() const { return run_id_; }

 private:
  void save(const std::string& path, int64_t epoch, int64_t batch);
  void restore(const std::string& path);
  void say(const char* fmt, ...) const;
  void warn(const char* fmt, ...) const;  // to the warnings stream
  // After a --stop-after-steps stop: says so, and with --checkpoint-every what the
  // checkpoint holds.
  void report_stop(int64_t steps) const;
  // The element-wise sum over the ranks (the values themselves in a one-process run).
  std::vector<double> sum_over_ranks(std::vector<double> v) const;

  RunConfig cfg_;
  DatasetPreset preset_;  // a copy: an image folder's class count is known once it is read
  std::FILE* log_;
  std::FILE* progress_;
  std::FILE* warnings_;
  ModelSpec spec_;
  std::shared_ptr<const data::Dataset> train_set_, test_set_;
  std::unique_ptr<data::Loader> train_loader_, test_loader_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::unique_ptr<DataParallelRun> dp_;
  std::unique_ptr<GuardedOutputs> outputs_;  // checked, and the checkpoint locked, for the run's lifetime
  nn::ScheduleConfig schedule_;
  std::string header_;
  std::string run_id_;  // every metrics line of the run; kept across a resume (checkpoint metadata)

  // Position: the next batch is batch `batch_` of epoch `epoch_`; step_ optimizer steps done.
  int64_t epoch_ = 0, batch_ = 0, step_ = 0;
  int64_t saved_step_ = -1;  // the step of this run's last save (-1: none yet)
  // Running sums of the current epoch's training metrics.
  double loss_sum_ = 0;
  int64_t correct_ = 0, seen_ = 0;
  bool resumed_mid_epoch_ = false;
  // What --allow-non-finite let through from the resumed checkpoint, for the message
  // when the first steps then diverge.
  std::string resumed_non_finite_;
  // The first training loss of this run (of this process, after a resume): the
  // reference of the blow-up rule (see run()).
  double first_loss_ = -1;
};

}  // namespace strata::train
