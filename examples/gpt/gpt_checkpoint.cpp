// strata_gpt's checkpoints: what save() writes beside the model and optimizer state (the model's
// options, the run's position and the running loss of the current stretch), and what restore()
// checks and takes back.
#include <cstdio>
#include <filesystem>
#include <limits>

#include "examples/gpt/gpt_trainer.h"
#include "examples/train/checkpoint_meta.h"
#include "examples/train/data_parallel_start.h"
#include "strata/nn/checkpoint.h"
#include "strata/ops/trace.h"

namespace strata::gpt {

namespace {
const std::string kMeta = "strata.gpt.";

// The options a checkpoint's model is built from, by their metadata names.
struct ModelOption {
  const char* option;
  const char* key;
  int64_t value;
};
std::vector<ModelOption> model_options(const GptOptions& o) {
  return {{"--block", "block", o.block}, {"--layers", "layers", o.layers}, {"--heads", "heads", o.heads},
          {"--embd", "embd", o.embd}};
}
}  // namespace

void GptTrainer::save(const std::string& path) {
  ops::TraceSpan span("checkpoint");
  // Collective: every rank's running loss, rank 0 writes their total.
  const std::vector<double> sums = dp_->sum({loss_sum_, static_cast<double>(loss_count_)});
  if (cfg_.rank != 0) return;
  const GptOptions& o = cfg_.o;
  nn::safetensors::Metadata meta;
  for (const ModelOption& m : model_options(o)) meta[kMeta + m.key] = std::to_string(m.value);
  meta[kMeta + "tokenizer"] = o.tokenizer;
  meta[kMeta + "vocab_size"] = std::to_string(config_.vocab_size);
  meta[kMeta + "steps"] = std::to_string(o.steps);
  meta[kMeta + "batch"] = std::to_string(o.batch);
  meta[kMeta + "seed"] = std::to_string(o.seed);
  meta[kMeta + "backend"] = o.backend;
  meta[kMeta + "dispatch"] = o.dispatch;
  meta[kMeta + "precision"] = o.precision;
  meta[kMeta + "run_id"] = run_id_;
  meta[kMeta + "world_size"] = std::to_string(cfg_.world);
  char exact[64];  // %a: the running sum survives a resume bit for bit
  std::snprintf(exact, sizeof exact, "%a", sums[0]);
  meta[kMeta + "loss_sum"] = exact;
  meta[kMeta + "loss_count"] = std::to_string(static_cast<int64_t>(sums[1]));
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  nn::save_checkpoint(path, model_->module(), opt_.get(), step_, meta);
  saved_step_ = step_;
}

void GptTrainer::restore(const std::string& path) {
  const GptOptions& o = cfg_.o;
  const nn::safetensors::Contents contents = nn::safetensors::load(path);
  const train::CheckpointMeta m(contents.metadata, path);
  // The model first, so that a mismatch names the options to pass.
  std::string differ, fix;
  auto compare = [&](const char* option, const std::string& saved, const std::string& ours) {
    if (saved == ours) return;
    if (!differ.empty()) differ += ", ", fix += " ";
    differ.append(option).append(" ").append(saved).append(" (this run: ").append(ours).append(")");
    fix.append(option).append(" ").append(saved);
  };
  for (const ModelOption& opt : model_options(o))
    compare(opt.option, std::to_string(m.integer(kMeta + opt.key, 1, int64_t{1} << 20)), std::to_string(opt.value));
  compare("--tokenizer", m.one_of(kMeta + "tokenizer", {"byte", "gpt2"}), o.tokenizer);
  STRATA_CHECK(differ.empty(), "resume: ", path, " holds another model than this run builds: ", differ,
               "; pass the options of the original run (", fix, ")");
  const int64_t vocab = m.integer(kMeta + "vocab_size", 1, int64_t{1} << 31);
  if (vocab != config_.vocab_size)
    m.fail(kMeta + "vocab_size", "is not this run's vocabulary (" + std::to_string(config_.vocab_size) +
                                     " tokens of --tokenizer " + o.tokenizer + ")");
  // The position, every field in its range before any tensor is loaded.
  const int64_t saved_steps = m.integer(kMeta + "steps", 1, int64_t{1} << 40);
  const int64_t step = m.integer("strata.step", 0, saved_steps);
  const int64_t saved_world = m.integer(kMeta + "world_size", 1, 1 << 20);
  const int64_t count = m.integer(kMeta + "loss_count", 0, step * saved_world);
  const double loss_sum = m.real(kMeta + "loss_sum", 0, std::numeric_limits<double>::max());
  if (count == 0 && loss_sum != 0) m.fail(kMeta + "loss_sum", "is not 0 although it sums no step's loss");
  STRATA_CHECK(saved_world == cfg_.world, "resume: checkpoint '", path, "' was written by a run of ", saved_world,
               " process(es); this run has ", cfg_.world, ": each rank draws batches of its own, so resume at the "
               "same world size (--nproc ", saved_world, ")");
  const int64_t saved_batch = m.integer(kMeta + "batch", 1, int64_t{1} << 20);
  const uint64_t saved_seed = m.unsigned_integer(kMeta + "seed");
  const std::string& saved_backend = m.text(kMeta + "backend");

  const nn::CheckpointInfo info = nn::load_checkpoint(contents, path, model_->module(), opt_.get(),
                                                      {o.allow_non_finite, "--allow-non-finite"});
  for (const std::string& w : info.warnings) {
    warn("warning: " + w + " (loaded: --allow-non-finite)\n");
    resumed_non_finite_ += (resumed_non_finite_.empty() ? "" : "; ") + w;
  }
  step_ = step;
  saved_step_ = step;
  // The saved sums are every rank's together: rank 0 carries them on, the others start from 0.
  loss_sum_ = cfg_.rank == 0 ? loss_sum : 0;
  loss_count_ = cfg_.rank == 0 ? count : 0;
  // The batches are a seeded stream: drawing those already trained on puts it where the run was.
  for (int64_t i = 0; i < step_; ++i) batches_->next();
  run_id_ = m.text(kMeta + "run_id");
  resumed_ = true;
  std::string other;  // what makes the continuation another run than the original
  auto note = [&](const std::string& what, const std::string& ours, const std::string& saved) {
    if (ours != saved) other += (other.empty() ? "" : ", ") + what + " " + ours + " (the checkpoint's: " + saved + ")";
  };
  note("--steps", std::to_string(o.steps), std::to_string(saved_steps));
  note("--batch", std::to_string(o.batch), std::to_string(saved_batch));
  note("--seed", std::to_string(o.seed), std::to_string(saved_seed));
  note("--backend", o.backend, saved_backend);
  if (!other.empty())
    warn("warning: resume: this run differs from the one that wrote the checkpoint: " + other +
         "; training continues, but not as the original run would have (the schedule follows --steps, the "
         "batches --batch and --seed, the rounding the backend)\n");
  say("resumed from " + path + ": step " + std::to_string(step_) + " of " + std::to_string(o.steps) + "\n");
}

}  // namespace strata::gpt
