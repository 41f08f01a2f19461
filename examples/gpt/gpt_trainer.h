#pragma once
// strata_gpt's training run: a GPT (nn::make_gpt) trained through nn::Model's train_step in the
// dispatch mode and precision of the command line, on nanoGPT's batches of a text corpus
// (data/text.h), with nanoGPT's recipe: AdamW (beta2 0.95) with weight decay on the matrices
// only (not on biases, layer norms or the embeddings), the gradients clipped to a global norm
// (nn/clip_grad.h, the model's gradient hook: inside the step in every mode), a cosine learning
// rate after a linear warm-up (nn/schedule.h). Every --eval-every steps and at the end: the
// held-out loss, a log line and a metrics line (gpt_metrics.h). Checkpoints hold the model, the
// optimizer and the run's position, and resume exactly: the batches are drawn from a generator
// seeded by --seed (repositioned by drawing the batches already trained on), the learning rate
// is a function of the step, so a resumed run's losses and weights are bitwise those of the
// uninterrupted run (tests/examples/gpt_trainer_test.cpp).
//
// Data parallel (world > 1, one process per GPU): each rank draws its own batches (a seed per
// rank), the gradients are averaged over the ranks before the clip, the metrics' train loss is
// the mean over every rank's steps, and rank 0 alone logs, writes metrics and checkpoints; every
// rank resumes from the checkpoint, at the same world size.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "examples/gpt/gpt_metrics.h"
#include "examples/gpt/gpt_options.h"
#include "strata/data/text.h"
#include "strata/data/tokenizer.h"
#include "strata/nn/model.h"
#include "strata/nn/optim.h"
#include "strata/nn/schedule.h"

namespace strata::train {
class DataParallelRun;
class GuardedOutputs;
}  // namespace strata::train

namespace strata::gpt {

struct GptRunResult {
  std::vector<GptMetrics> lines;  // this call's metrics lines
  std::vector<double> losses;     // each step's training loss, this call (this rank's batches)
  int64_t steps = 0;              // steps done after the call
  bool interrupted = false;       // stopped by --stop-after-steps
};

class GptTrainer {
 public:
  // Reads the corpus, builds the model and optimizer, restores cfg.o.resume if set. log: the run's
  // log (stdout in strata_gpt; nullptr: silent); progress: the progress bar (stderr; nullptr:
  // none); warnings: warnings and notes about the run's surroundings (stderr; nullptr: none).
  GptTrainer(const GptRunConfig& cfg, std::FILE* log, std::FILE* progress, std::FILE* warnings = nullptr);
  ~GptTrainer();

  // Trains up to --steps (from the resumed position), or --stop-after-steps more.
  GptRunResult run();
  // The mean loss of --eval-batches held-out batches (the same batches at every call); NaN when
  // the held-out text is no longer than a block.
  double held_out_loss();
  // --sample tokens after --prompt, decoded (the prompt first), drawn with --temperature and
  // --top-k from the seed; runs a tape-mode copy of the model (decoding's key/value cache).
  std::string sample();

  nn::Model& model() { return *model_; }
  nn::Optimizer& optimizer() { return *opt_; }
  int64_t step() const { return step_; }
  const std::string& run_id() const { return run_id_; }
  const std::string& header() const { return header_; }

 private:
  void save(const std::string& path);
  void restore(const std::string& path);
  void say(const std::string& line) const;
  void warn(const std::string& line) const;
  GptMetrics evaluation_line(double train_seconds);

  GptRunConfig cfg_;
  std::FILE* log_;
  std::FILE* progress_;
  std::FILE* warnings_;
  std::unique_ptr<data::Tokenizer> tok_;
  data::TextCorpus corpus_;
  nn::GptConfig config_;
  std::unique_ptr<data::TextBatches> batches_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::unique_ptr<train::DataParallelRun> dp_;
  std::unique_ptr<train::GuardedOutputs> outputs_;
  nn::ScheduleConfig schedule_;
  std::string header_, run_id_;
  int64_t step_ = 0;
  int64_t saved_step_ = -1;  // the step of this run's last save
  // Since the latest metrics line: the sum of the steps' losses and their count (over every rank
  // at a save), and whether the run resumed in between.
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  bool resumed_ = false;
  std::string resumed_non_finite_;  // what --allow-non-finite let through, for a divergence message
};

}  // namespace strata::gpt
