// The trainer's checkpoints: what save() writes beside the model and optimizer state (the
// run's position, running sums and options), and what restore() checks and takes back.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "examples/train/checkpoint_meta.h"
#include "examples/train/trainer.h"
#include "examples/train/trainer_dropout.h"
#include "strata/nn/checkpoint.h"
#include "strata/ops/trace.h"

namespace strata::train {

namespace {
// A double exactly, as C's %a writes it (the running loss sum survives a resume bit for bit).
std::string hex_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}
}  // namespace

void Trainer::save(const std::string& path, int64_t epoch, int64_t batch) {
  ops::TraceSpan span("checkpoint");
  // Collective: every rank contributes its running sums, rank 0 writes their total.
  const std::vector<double> sums =
      sum_over_ranks({loss_sum_, static_cast<double>(correct_), static_cast<double>(seen_)});
  if (cfg_.rank != 0) return;
  nn::safetensors::Metadata meta;
  write_spec(spec_, preset_.name, meta);
  meta["strata.train.epoch"] = std::to_string(epoch);
  meta["strata.train.batch"] = std::to_string(batch);
  meta["strata.train.loss_sum"] = hex_double(sums[0]);
  meta["strata.train.correct"] = std::to_string(static_cast<int64_t>(sums[1]));
  meta["strata.train.seen"] = std::to_string(static_cast<int64_t>(sums[2]));
  meta["strata.train.batch_size"] = std::to_string(cfg_.o.batch_size);
  meta["strata.train.train_images"] = std::to_string(train_set_->size());
  meta["strata.train.epochs"] = std::to_string(cfg_.o.epochs);
  meta["strata.train.backend"] = cfg_.o.backend;
  meta["strata.train.dispatch"] = cfg_.o.dispatch;
  meta["strata.train.run_id"] = run_id_;
  meta["strata.train.world_size"] = std::to_string(cfg_.world);
  for_each_dropout(*model_, [&](const std::string& name, auto& d) {
    meta["strata.train.dropout." + name] = std::to_string(d.offset());
  });
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  nn::save_checkpoint(path, model_->module(), opt_.get(), step_, meta);
  saved_step_ = step_;
}

void Trainer::restore(const std::string& path) {
  std::string dataset;
  const nn::safetensors::Contents contents = nn::safetensors::load(path);
  {
    // Validate the architecture before loading so a mismatch names the options.
    const ModelSpec s = read_spec(contents.metadata, path, &dataset);
    std::string differ, fix;  // "--option saved (this run: ours)", "--option saved"
    auto compare = [&](const char* option, const std::string& saved, const std::string& ours) {
      if (saved == ours) return;
      differ += std::string(differ.empty() ? "" : ", ") + option + " " + saved + " (this run: " + ours + ")";
      fix += std::string(fix.empty() ? "" : " ") + option + " " + saved;
    };
    compare("--dataset", dataset, preset_.name);
    compare("--model", s.model, spec_.model);
    // Only the options the model is built from: a LeNet has no width, a ResNet no LeNet variant.
    if (s.model == "lenet" && spec_.model == "lenet") compare("--lenet-variant", s.lenet_variant, spec_.lenet_variant);
    if (s.model != "lenet" && spec_.model != "lenet")
      compare("--width", std::to_string(s.base_channels), std::to_string(spec_.base_channels));
    if (dataset == preset_.name)  // another dataset's images differ anyway
      compare("--resolution", std::to_string(s.image_size), std::to_string(spec_.image_size));
    STRATA_CHECK(differ.empty(), "resume: ", path, " holds another model than this run builds: ", differ,
                 "; pass the options of the original run (", fix, ")");
  }
  // Every position field is checked, in its range and against the others, before any
  // tensor is loaded: a corrupt epoch or step must not start a run "at epoch 2^63".
  const CheckpointMeta m(contents.metadata, path);
  const std::string k = "strata.train.";
  const int64_t saved_epochs = m.integer(k + "epochs", 1, 100000);
  const int64_t saved_batch = m.integer(k + "batch_size", 1, int64_t{1} << 20);
  const int64_t saved_images = m.integer(k + "train_images", 1, int64_t{1} << 40);
  const int64_t saved_bpe = (saved_images + saved_batch - 1) / saved_batch;
  const int64_t epoch = m.integer(k + "epoch", 0, saved_epochs);
  // A checkpoint inside an epoch is written only before its last batch.
  const int64_t batch = m.integer(k + "batch", 0, epoch == saved_epochs ? 0 : saved_bpe - 1);
  // (Not bounded by batch x batch size: a run resumed with another batch size counts
  // the images of both.)
  const int64_t seen = m.integer(k + "seen", batch, batch == 0 ? 0 : int64_t{1} << 40);
  const int64_t correct = m.integer(k + "correct", 0, seen);
  const double loss_sum = m.real(k + "loss_sum", 0, std::numeric_limits<double>::max());
  if (seen == 0 && loss_sum != 0) m.fail(k + "loss_sum", "is not 0 although no image of the epoch was seen");
  // At least one step per finished epoch and per batch of this one.
  const int64_t step = m.integer("strata.step", epoch + batch, int64_t{1} << 53);
  if (m.has("strata.optimizer_steps")) m.integer("strata.optimizer_steps", 0, step);
  const uint64_t saved_seed = m.unsigned_integer(k + "seed");
  const std::string& saved_backend = m.text(k + "backend");
  std::vector<uint64_t> dropout_offsets;
  for_each_dropout(*model_, [&](const std::string& name, auto&) {
    dropout_offsets.push_back(m.unsigned_integer(k + "dropout." + name));
  });
  // Older checkpoints hold no world size: they were written by one process.
  const int64_t saved_world = m.has(k + "world_size") ? m.integer(k + "world_size", 1, 1 << 20) : 1;
  STRATA_CHECK(saved_world == cfg_.world || batch == 0, "resume: checkpoint '", path, "' stopped inside epoch ",
               epoch + 1, " of a run on ", saved_world, " process(es); this run has ", cfg_.world,
               ": resume inside an epoch at the same world size (--nproc ", saved_world,
               "), or from a checkpoint written at an epoch's end");
  const int64_t bpe = train_loader_->batches_per_epoch();
  STRATA_CHECK(batch < bpe || batch == 0, "resume: checkpoint '", path, "' stopped after batch ", batch,
               " of its epoch ", epoch + 1, ", but this run's epochs have ", bpe, " batches (batch size ",
               cfg_.o.batch_size, ", ", train_set_->size(), " images): resume with the original --batch-size (",
               saved_batch, ")");

  const nn::CheckpointInfo info = nn::load_checkpoint(contents, path, model_->module(), opt_.get(),
                                                      {cfg_.o.allow_non_finite, "--allow-non-finite"});
  for (const std::string& w : info.warnings) {
    warn("warning: %s (loaded: --allow-non-finite)\n", w.c_str());
    resumed_non_finite_ += (resumed_non_finite_.empty() ? "" : "; ") + w;
  }
  step_ = step;
  epoch_ = epoch;
  batch_ = batch;
  // The saved sums are every rank's together: rank 0 carries them on, the others start from 0.
  loss_sum_ = cfg_.rank == 0 ? loss_sum : 0;
  correct_ = cfg_.rank == 0 ? correct : 0;
  seen_ = cfg_.rank == 0 ? seen : 0;
  int64_t index = 0;
  for_each_dropout(*model_, [&](const std::string&, auto& d) {
    d.set_seed(dropout_seed(cfg_.o.seed, index), dropout_offsets[static_cast<size_t>(index)]);
    ++index;
  });
  if (saved_backend != cfg_.o.backend)
    warn("warning: resume: the checkpoint was written on backend %s, this run uses %s: backends round differently, "
         "so the continuation is not bitwise that of the original run\n",
         saved_backend.c_str(), cfg_.o.backend.c_str());
  std::string differ;  // what makes the continuation another run than the original
  auto compare = [&](const std::string& what, auto saved, auto ours) {
    if (saved != static_cast<decltype(saved)>(ours))
      differ += (differ.empty() ? "" : ", ") + what + " " + std::to_string(ours) + " (the checkpoint's: " +
                std::to_string(saved) + ")";
  };
  compare("--batch-size", saved_batch, cfg_.o.batch_size);
  compare("training images", saved_images, train_set_->size());
  compare("--epochs", saved_epochs, cfg_.o.epochs);
  compare("--seed", saved_seed, cfg_.o.seed);
  if (!differ.empty())
    warn("warning: resume: this run differs from the one that wrote the checkpoint: %s; training continues, but not "
         "as the original run would have\n",
         differ.c_str());
  if (m.has("strata.train.run_id")) run_id_ = m.text("strata.train.run_id");  // absent in older checkpoints
  resumed_mid_epoch_ = batch_ > 0;
  say("resumed from %s: epoch %lld, batch %lld, step %lld\n", path.c_str(), static_cast<long long>(epoch_ + 1),
      static_cast<long long>(batch_), static_cast<long long>(step_));
}

}  // namespace strata::train
