#include "examples/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "strata/autograd/grad_mode.h"
#include "strata/core/allocator.h"
#include "strata/core/file.h"
#include "strata/data/random.h"
#include "examples/train/checkpoint_meta.h"
#include "examples/train/precision_check.h"
#include "examples/train/progress.h"
#include "examples/train/trainer_dropout.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/layers/activation.h"
#include "strata/nn/policy.h"
#include "strata/ops/trace.h"

namespace strata::train {

namespace {

using Clock = std::chrono::steady_clock;

// The blow-up rule's factor (orders of magnitude a step's loss may grow over the first).
constexpr double kLossBlowUp = 1e4;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string env_or(const char* var, const char* fallback) {
  const char* v = std::getenv(var);
  return v ? v : fallback;
}

}  // namespace

void Trainer::say(const char* fmt, ...) const {
  if (!log_) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(log_, fmt, ap);
  va_end(ap);
  std::fflush(log_);
}

void Trainer::warn(const char* fmt, ...) const {
  if (!warnings_) return;
  if (log_) std::fflush(log_);  // in order with the log when both go to one terminal
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(warnings_, fmt, ap);
  va_end(ap);
  std::fflush(warnings_);
}

std::vector<double> Trainer::sum_over_ranks(std::vector<double> v) const { return dp_->sum(std::move(v)); }

Trainer::Trainer(const RunConfig& cfg, std::FILE* log, std::FILE* progress, std::FILE* warnings)
    : cfg_(cfg), preset_(dataset_preset(cfg.o.dataset)), log_(cfg.rank == 0 ? log : nullptr),
      progress_(cfg.rank == 0 ? progress : nullptr), warnings_(cfg.rank == 0 ? warnings : nullptr),
      run_id_(new_run_id()) {
  const TrainOptions& o = cfg_.o;
  if (o.tf32) backends::registry().get(o.backend).set_allow_tf32(true);
  DataRequest req{o.data_dir, o.resolution, o.voc_train_set, o.voc_test_set, o.augment == 1};
  train_set_ = limit_dataset(load_split(preset_, req, data::Split::train), o.train_limit);
  test_set_ = limit_dataset(load_split(preset_, req, data::Split::test), o.test_limit);
  if (preset_.num_classes == 0) {  // classes from the training folder (imagefolder)
    preset_.num_classes = train_set_->num_classes();
    STRATA_CHECK(test_set_->num_classes() == preset_.num_classes, test_set_->name(), ": ",
                 test_set_->num_classes(), " class folders, but ", train_set_->name(), " has ",
                 preset_.num_classes, ": the two must hold the same classes");
  }
  // A valid file may hold no images; training would run zero steps and fail later
  // without naming it.
  for (const auto* set : {&train_set_, &test_set_}) {
    if ((*set)->size() > 0) continue;  // (an image folder lists a million files: name them only when needed)
    std::string files;
    for (const auto& f : (*set)->source_files()) files += (files.empty() ? "" : ", ") + quoted(f);
    STRATA_CHECK((*set)->size() > 0, (*set)->name(), ": no images", files.empty() ? "" : " in ", files,
                 set == &train_set_ ? ": nothing to train on" : ": nothing to evaluate on");
  }

  data::LoaderOptions tl;
  tl.batch_size = o.batch_size;
  tl.shuffle = true;
  tl.seed = o.seed;
  tl.num_workers = o.workers;
  // Page-locked batches make the host-to-device copy of a GPU run asynchronous and faster.
  tl.pin_memory = backends::registry().get(o.backend).device_type() == DeviceType::cuda;
  tl.shard_rank = cfg_.rank;
  tl.shard_count = cfg_.world;
  tl.transforms = make_transforms(preset_, true, o.augment == 1, train_set_->image_shape(), o.resolution);
  train_loader_ = std::make_unique<data::Loader>(train_set_, tl);
  data::LoaderOptions el;
  el.batch_size = o.eval_batch_size;
  el.shuffle = false;
  el.seed = o.seed;
  el.num_workers = o.workers;
  el.pin_memory = tl.pin_memory;
  // mAP needs every score in one place: multi-label evaluation runs whole on every rank.
  if (preset_.task == Task::classification) el.shard_rank = cfg_.rank, el.shard_count = cfg_.world;
  el.transforms = make_transforms(preset_, false, false, test_set_->image_shape(), o.resolution);
  test_loader_ = std::make_unique<data::Loader>(test_set_, el);

  const Shape chw = train_loader_->image_shape();
  STRATA_CHECK(chw[1] == chw[2], preset_.name, ": images are ", chw[1], "x", chw[2],
               "; the models need square inputs (use --resolution)");
  spec_.model = o.model;
  spec_.lenet_variant = o.lenet_variant;
  spec_.base_channels = o.base_channels;
  spec_.in_channels = chw[0];
  spec_.image_size = chw[1];
  spec_.num_classes = preset_.num_classes;
  spec_.init = o.init.empty() ? std::string(default_init(o.model)) : o.init;
  spec_.zero_last_bn_gamma = o.zero_last_bn_gamma;
  spec_.seed = o.seed;
  spec_.task = preset_.task;
  spec_.precision = o.precision;
  if (o.channels_last || o.nchw) spec_.memory_format = o.nchw ? MemoryFormat::contiguous : MemoryFormat::channels_last;
  check_precision_trains(spec_, cfg_.mode, o.backend, chw, train_set_->target_shape(), train_set_->target_dtype());
  model_ = build_model(spec_, cfg_.mode, o.backend);
  int64_t index = 0;
  for_each_dropout(*model_, [&](const std::string&, auto& d) { d.set_seed(dropout_seed(o.seed, index++), 0); });
  dp_ = std::make_unique<DataParallelRun>(*model_, RankPlace{cfg_.rank, cfg_.world, cfg_.local_rank, cfg_.local_world},
                                          o.dist_timeout, o.sync_bn, o.grad_exchange);

  nn::OptimizerConfig oc;
  oc.kind = nn::parse_optimizer_kind(cfg_.optimizer);
  oc.lr = cfg_.lr;
  oc.momentum = o.momentum;
  oc.rmsprop.momentum = oc.kind == nn::OptimizerKind::rmsprop ? o.momentum : 0.0;
  oc.nesterov = o.nesterov;
  oc.weight_decay = cfg_.weight_decay;
  oc.no_decay_bn_bias = o.model != "lenet";
  opt_ = model_->make_optimizer(oc);

  // Outputs are checked once the checkpoint's size is known: the parameters and
  // buffers, and the optimizer's slots per parameter (none exist before its first step).
  uint64_t state_bytes = 0, param_bytes = 0;
  for (const auto& [n, t] : model_->state_dict()) state_bytes += t.nbytes();
  for (const auto& [n, t] : model_->module().named_parameters()) param_bytes += t.nbytes();
  const uint64_t slots = opt_->state_specs().size();
  std::vector<std::filesystem::path> inputs = train_set_->source_files();
  for (auto& f : test_set_->source_files()) inputs.push_back(std::move(f));
  if (cfg_.rank == 0)  // the only rank that writes
    outputs_ = std::make_unique<GuardedOutputs>(o, inputs, state_bytes + slots * param_bytes + (1u << 16));

  const int64_t bpe = train_loader_->batches_per_epoch();
  schedule_.kind = nn::parse_schedule_kind(o.schedule);
  schedule_.base_lr = cfg_.lr;
  schedule_.total_steps = bpe * o.epochs;
  schedule_.warmup_steps = static_cast<int64_t>(std::llround(o.warmup_epochs * static_cast<double>(bpe)));
  schedule_.warmup_start_factor = 0.1;
  schedule_.step_size = std::max<int64_t>(1, bpe * std::max(1, o.epochs / 3));
  schedule_.gamma = 0.1;

  // The log's first lines: what ran, how, and on what.
  char line[1024];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    header_ += line;
  };
  add("strata_train: dataset %s | model %s | backend %s (%s) | dispatch %s | precision %s%s | init %s | "
      "seed %llu\n",
      preset_.name.c_str(),
      (o.model + (o.model == "lenet" ? " (" + o.lenet_variant + ")" : "")).c_str(), o.backend.c_str(),
      cfg_.backend_note.c_str(), o.dispatch.c_str(), o.precision.c_str(),
      o.tf32 ? " (TF32 conv/linear)" : "", nn::describe(nn::InitConfig{nn::parse_init_policy(spec_.init), spec_.zero_last_bn_gamma, o.seed}).c_str(),
      static_cast<unsigned long long>(o.seed));
  add("backends: %s\n", backends::registry().describe_usable().c_str());
  add("data: train %lld images, test %lld images (%s), image [%lld,%lld,%lld], %lld classes, augmentation %s, "
      "batch %lld (%lld steps/epoch), eval batch %lld, loader workers %d\n",
      static_cast<long long>(train_set_->size()), static_cast<long long>(test_set_->size()), o.data_dir.c_str(),
      static_cast<long long>(chw[0]), static_cast<long long>(chw[1]), static_cast<long long>(chw[2]),
      static_cast<long long>(preset_.num_classes), o.augment == 1 ? "on" : "off", static_cast<long long>(o.batch_size),
      static_cast<long long>(bpe), static_cast<long long>(o.eval_batch_size), o.workers);
  add("model: %s\n", model_->describe().c_str());
  add("optimizer: %s | schedule: %s | epochs %d\n", opt_->describe().c_str(), nn::describe(schedule_).c_str(),
      o.epochs);
  const std::string details = backends::registry().get(o.backend).describe();
  add("threads: OMP_NUM_THREADS=%s OPENBLAS_NUM_THREADS=%s OMP_WAIT_POLICY=%s%s%s\n",
      env_or("OMP_NUM_THREADS", "(unset)").c_str(), env_or("OPENBLAS_NUM_THREADS", "(unset)").c_str(),
      env_or("OMP_WAIT_POLICY", "(unset)").c_str(), details.empty() ? "" : " | ", details.c_str());
  if (dp_->active())
    add("data parallel: %s; batch %lld per GPU, %lld in all; batch norm statistics %s; timeout %g s\n",
        dp_->describe().c_str(), static_cast<long long>(o.batch_size),
        static_cast<long long>(o.batch_size * cfg_.world),
        o.sync_bn ? "over all GPUs' rows (--sync-bn)" : "per GPU", o.dist_timeout);
  if (o.sync_bn && cfg_.world == 1)
    add("note: --sync-bn in one process is plain batch norm (the statistics of this process's rows), as PyTorch's "
        "SyncBatchNorm on one process\n");
  if (o.backend == "null")
    add("note: backend null computes nothing: the losses and accuracies of this run are whatever "
        "memory held, not results; it measures strata's own overhead\n");
  say("%s", header_.c_str());
  if (outputs_)
    for (const std::string& note : outputs_->notes()) warn("%s\n", note.c_str());

  if (!o.resume.empty()) restore(o.resume);
}

Trainer::~Trainer() = default;

void Trainer::report_stop(int64_t steps) const {
  say("stopped after %lld step%s of this run (--stop-after-steps; step %lld of the whole run), as if interrupted\n",
      static_cast<long long>(steps), steps == 1 ? "" : "s", static_cast<long long>(step_));
  const std::string& ck = cfg_.o.checkpoint;
  if (ck.empty() || cfg_.o.checkpoint_every == 0) return;  // then saved at the stop, and said so
  if (saved_step_ == step_)
    say("checkpoint: %s holds step %lld, where the run stopped\n", ck.c_str(), static_cast<long long>(step_));
  else if (saved_step_ >= 0)  // --checkpoint-every: a stop between saves, as an interruption there
    say("checkpoint: %s holds step %lld (--checkpoint-every %lld); a resume from it redoes the %lld step%s after "
        "it\n",
        ck.c_str(), static_cast<long long>(saved_step_), static_cast<long long>(cfg_.o.checkpoint_every),
        static_cast<long long>(step_ - saved_step_), step_ - saved_step_ == 1 ? "" : "s");
  else
    say("checkpoint: %s: this run wrote none before the stop (--checkpoint-every %lld)\n", ck.c_str(),
        static_cast<long long>(cfg_.o.checkpoint_every));
}

EvalResult Trainer::evaluate() {
  ops::TraceSpan span("evaluate");
  EvalResult r;
  std::vector<float> scores, targets;
  nn::EvalObserver keep_scores;  // mAP needs every score in one place
  if (preset_.task == Task::multilabel)
    keep_scores = [&](const Tensor& logits, const Tensor& t) {
      const std::vector<float> l = logits.to_vector<float>(), v = t.to_vector<float>();
      scores.insert(scores.end(), l.begin(), l.end());
      targets.insert(targets.end(), v.begin(), v.end());
    };
  const nn::EvalResult e = model_->evaluate(*test_loader_, keep_scores);
  double loss_sum = e.loss_sum;
  int64_t correct = e.correct;
  r.images = e.examples;
  if (preset_.task == Task::classification) {  // sharded: the sums over the ranks
    const std::vector<double> t =
        sum_over_ranks({loss_sum, static_cast<double>(correct), static_cast<double>(r.images)});
    loss_sum = t[0], correct = static_cast<int64_t>(t[1]), r.images = static_cast<int64_t>(t[2]);
  }
  STRATA_CHECK(r.images > 0, "evaluate: the test set is empty");
  r.loss = loss_sum / static_cast<double>(r.images);
  // A finite training loss does not prove finite weights: the last step's update can
  // overflow them. Nothing is written from such a model (no metrics line, no checkpoint).
  STRATA_CHECK(std::isfinite(r.loss) || cfg_.o.backend == "null", "training diverged: the evaluation at epoch ",
               epoch_ + 1, ", step ", step_, " gave test loss ", r.loss,
               ": the model's parameters or outputs are no longer finite",
               cfg_.o.checkpoint.empty() ? std::string() : "; '" + cfg_.o.checkpoint + "' keeps its last save",
               "; try a smaller --lr");
  r.accuracy = static_cast<double>(correct) / static_cast<double>(r.images);
  if (preset_.task == Task::multilabel) r.map = mean_average_precision(scores, targets, r.images, preset_.num_classes);
  return r;
}

RunResult Trainer::run() {
  const TrainOptions& o = cfg_.o;
  RunResult result;
  const int64_t bpe = train_loader_->batches_per_epoch();
  Allocator& device_alloc = allocator_for(model_->device());
  const bool multilabel = preset_.task == Task::multilabel;
  double best = -1;
  const auto run_start = Clock::now();
  // --stop-after-steps counts the steps of this call, wherever a resume started it.
  const int64_t stop_at = o.stop_after_steps > 0 ? step_ + o.stop_after_steps : -1;
  bool stop_after_epoch = false;  // the stop fell on the epoch's last step
  if (epoch_ >= o.epochs)
    say("nothing to do: the run is at epoch %lld of %d (raise --epochs to train longer)\n",
        static_cast<long long>(epoch_), o.epochs);
  for (; epoch_ < o.epochs; ++epoch_) {
    const auto epoch_start = Clock::now();
    device_alloc.reset_peak();
    train_loader_->start_epoch(epoch_);
    train_loader_->reset_stats();
    for (int64_t k = 0; k < batch_; ++k) train_loader_->next();  // a resumed epoch: skip what was done
    train_loader_->reset_stats();
    const bool resumed = resumed_mid_epoch_;
    resumed_mid_epoch_ = false;
    if (batch_ == 0) loss_sum_ = 0, correct_ = 0, seen_ = 0;
    char label[64];
    std::snprintf(label, sizeof label, "epoch %lld/%d", static_cast<long long>(epoch_ + 1), o.epochs);
    ProgressBar bar(progress_, o.progress, label, bpe, batch_);
    model_->train();
    int64_t images = 0;
    double lr = opt_->lr();
    while (auto b = train_loader_->next()) {
      lr = nn::lr_at(schedule_, step_);
      opt_->set_lr(lr);
      ops::TraceSpan span("step");  // the step and its bookkeeping; gaps between steps: data loading
      const nn::StepResult r = model_->train_step(b->images, b->targets, *opt_);
      const int64_t n = b->images.size(0);
      const double loss = r.loss.item();
      // (The null backend computes nothing: its "losses" are whatever memory held.)
      STRATA_CHECK(std::isfinite(loss) || o.backend == "null", "training diverged: loss is ", loss, " at step ",
                   step_ + 1, " (epoch ", epoch_ + 1, ", lr ", lr, "); ",
                   resumed_non_finite_.empty() ? "try a smaller --lr"
                                               : "the run resumed from a checkpoint holding non-finite values (" +
                                                     resumed_non_finite_ + ")");
      // A finite blow-up ends the run too: once one step's loss exceeds 10^4 times the
      // first loss of this run (and 10^4), the weights have run away; no run recovers
      // from that, and waiting for a NaN wastes the rest of the epoch.
      if (o.backend != "null") {
        if (first_loss_ < 0) first_loss_ = loss;
        STRATA_CHECK(loss <= kLossBlowUp * std::max(first_loss_, 1.0), "training diverged: loss ", loss, " at step ",
                     step_ + 1, " (epoch ", epoch_ + 1, ", lr ", lr, ") is more than ", kLossBlowUp,
                     " times the first step's loss ", first_loss_, "; try a smaller --lr");
      }
      loss_sum_ += loss * static_cast<double>(n);
      seen_ += n;
      if (!multilabel) {
        const std::vector<float> logits = r.logits.to_vector<float>();
        correct_ += nn::count_correct(logits.data(), b->targets.data<int64_t>(), n, preset_.num_classes);
      }
      images += n;
      ++step_;
      ++batch_;
      bar.update(batch_, loss_sum_ / static_cast<double>(seen_),
                 multilabel ? NAN : static_cast<double>(correct_) / static_cast<double>(seen_), n);
      if (!o.checkpoint.empty() && o.checkpoint_every > 0 && step_ % o.checkpoint_every == 0 && batch_ < bpe)
        save(o.checkpoint, epoch_, batch_);
      if (step_ == stop_at) {
        // A checkpoint inside an epoch is one before its last batch: a stop on the last
        // finishes the epoch (evaluation, metrics, checkpoint) first.
        if (batch_ == bpe) {
          stop_after_epoch = epoch_ + 1 < o.epochs;  // else the run is done anyway
          break;
        }
        bar.finish();
        if (!o.checkpoint.empty() && o.checkpoint_every == 0) {
          save(o.checkpoint, epoch_, batch_);
          say("checkpoint: %s (epoch %lld, batch %lld, step %lld), written at the stop\n", o.checkpoint.c_str(),
              static_cast<long long>(epoch_ + 1), static_cast<long long>(batch_), static_cast<long long>(step_));
        }
        report_stop(o.stop_after_steps);
        result.interrupted = true;
        result.steps = step_;
        return result;
      }
    }
    bar.finish();
    // The epoch's training metrics over every rank (each saw its shard).
    const std::vector<double> tot =
        sum_over_ranks({loss_sum_, static_cast<double>(correct_), static_cast<double>(seen_), static_cast<double>(images)});
    loss_sum_ = tot[0], correct_ = static_cast<int64_t>(tot[1]), seen_ = static_cast<int64_t>(tot[2]);
    images = static_cast<int64_t>(tot[3]);
    const double train_seconds = seconds_since(epoch_start);
    const double wait = train_loader_->stats().wait_seconds;
    const auto eval_start = Clock::now();
    const EvalResult ev = evaluate();
    const double eval_seconds = seconds_since(eval_start);

    EpochMetrics m;
    m.run_id = run_id_;
    m.time = iso8601_utc(std::chrono::system_clock::now());
    m.epoch = epoch_ + 1;
    m.epochs = o.epochs;
    m.step = step_;
    m.dataset = preset_.name;
    m.model = o.model;
    m.backend = o.backend;
    m.dispatch = o.dispatch;
    m.precision = o.precision + (o.tf32 ? "+tf32" : "");
    m.seed = o.seed;
    m.lr = lr;
    m.train_loss = seen_ ? loss_sum_ / static_cast<double>(seen_) : NAN;
    m.train_accuracy = multilabel || !seen_ ? NAN : static_cast<double>(correct_) / static_cast<double>(seen_);
    m.test_loss = ev.loss;
    m.test_accuracy = ev.accuracy;
    m.test_map = ev.map;
    m.multilabel = multilabel;
    m.train_images = seen_;
    m.test_images = ev.images;
    m.train_seconds = train_seconds;
    m.eval_seconds = eval_seconds;
    m.epoch_seconds = seconds_since(epoch_start);
    m.images_per_second = train_seconds > 0 ? static_cast<double>(images) / train_seconds : 0;
    m.data_wait_seconds = wait;
    m.peak_memory_bytes = static_cast<int64_t>(device_alloc.stats().peak_bytes);
    m.max_rss_bytes = max_rss_bytes();
    m.resumed = resumed;
    result.epochs.push_back(m);
    if (!o.metrics.empty() && cfg_.rank == 0) append_json_line(o.metrics, to_json_line(m));

    const double score = multilabel ? ev.map : ev.accuracy;
    best = std::max(best, score);
    char test[96];
    if (multilabel)
      std::snprintf(test, sizeof test, "test loss %.4f mAP %.2f%%", ev.loss, 100.0 * ev.map);
    else
      std::snprintf(test, sizeof test, "test loss %.4f acc %.2f%%", ev.loss, 100.0 * ev.accuracy);
    char train[96];
    if (multilabel)
      std::snprintf(train, sizeof train, "train loss %.4f", m.train_loss);
    else
      std::snprintf(train, sizeof train, "train loss %.4f acc %.2f%%", m.train_loss, 100.0 * m.train_accuracy);
    say("epoch %lld/%d: %s | %s | %.1f s (train %.1f s, %.0f img/s, data wait %.1f s; eval %.1f s) | peak %s, "
        "rss %s\n",
        static_cast<long long>(epoch_ + 1), o.epochs, train, test, m.epoch_seconds, train_seconds,
        m.images_per_second, wait, eval_seconds, mib(m.peak_memory_bytes).c_str(), mib(m.max_rss_bytes).c_str());

    batch_ = 0;
    loss_sum_ = 0, correct_ = 0, seen_ = 0;
    if (!o.checkpoint.empty()) {
      save(o.checkpoint, epoch_ + 1, 0);
      say("checkpoint: %s (epoch %lld, step %lld)\n", o.checkpoint.c_str(), static_cast<long long>(epoch_ + 1),
          static_cast<long long>(step_));
    }
    if (stop_after_epoch) {
      ++epoch_;
      report_stop(o.stop_after_steps);
      result.interrupted = true;
      result.steps = step_;
      return result;
    }
  }
  result.steps = step_;
  if (!result.epochs.empty())
    say("done: %lld epoch(s) in %s; final test %s %.2f%% (best %.2f%%)\n",
        static_cast<long long>(result.epochs.size()), ProgressBar::format_duration(seconds_since(run_start)).c_str(),
        multilabel ? "mAP" : "accuracy", 100.0 * (multilabel ? result.epochs.back().test_map
                                                             : result.epochs.back().test_accuracy),
        100.0 * best);
  return result;
}

}  // namespace strata::train
