#include "examples/gpt/gpt_trainer.h"

#include <chrono>
#include <cmath>
#include <cstdarg>

#include "examples/train/data_parallel_start.h"
#include "examples/train/outputs.h"
#include "examples/train/progress.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/allocator.h"
#include "strata/core/factories.h"
#include "strata/core/file.h"
#include "strata/data/gpt2_tokenizer.h"
#include "strata/data/random.h"
#include "strata/nn/clip_grad.h"
#include "strata/nn/generate.h"
#include "strata/nn/policy.h"
#include "strata/ops/trace.h"

namespace strata::gpt {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string format(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::unique_ptr<data::Tokenizer> make_tokenizer(const GptOptions& o) {
  if (o.tokenizer == "gpt2") return std::make_unique<data::Gpt2Tokenizer>(o.bpe_dir);
  return std::make_unique<data::ByteTokenizer>();
}

// Rank 0 draws the batches a one-process run draws; the other ranks draws of their own.
uint64_t batch_seed(uint64_t seed, int rank) {
  return rank == 0 ? seed + 1 : data::mix_seed(seed + 1, 0x72616e6bULL /* "rank" */, static_cast<uint64_t>(rank));
}

}  // namespace

void GptTrainer::say(const std::string& line) const {
  if (!log_) return;
  std::fputs(line.c_str(), log_);
  std::fflush(log_);
}

void GptTrainer::warn(const std::string& line) const {
  if (!warnings_) return;
  if (log_) std::fflush(log_);  // in order with the log when both go to one terminal
  std::fputs(line.c_str(), warnings_);
  std::fflush(warnings_);
}

GptTrainer::GptTrainer(const GptRunConfig& cfg, std::FILE* log, std::FILE* progress, std::FILE* warnings)
    : cfg_(cfg), log_(cfg.rank == 0 ? log : nullptr), progress_(cfg.rank == 0 ? progress : nullptr),
      warnings_(cfg.rank == 0 ? warnings : nullptr), run_id_(train::new_run_id()) {
  const GptOptions& o = cfg_.o;
  tok_ = make_tokenizer(o);
  corpus_ = data::load_text(o.data, o.held_out, o.suffix,
                            o.format == "brown" ? data::TextFormat::brown : data::TextFormat::plain, *tok_);
  header_ += format("corpus: %zu file(s), %zu training and %zu held-out tokens (%s)\n", corpus_.files.size(),
                    corpus_.train.size(), corpus_.held_out.size(), o.tokenizer.c_str());
  STRATA_CHECK(static_cast<int64_t>(corpus_.train.size()) > o.block, "--data ", quoted(o.data), ": its ",
               corpus_.train.size(), " training tokens are no more than one block (--block ", o.block,
               "): nothing to train on; give more text or a smaller --block");
  batches_ = std::make_unique<data::TextBatches>(corpus_.train, o.batch, o.block, batch_seed(o.seed, cfg_.rank));

  // GPT-2's 50257 as it is: nanoGPT pads it to 50304 for its GPU kernels' tiles, but an untrained
  // model samples the padding's ids too, and they have no text to decode.
  config_.vocab_size = tok_->vocab_size();
  config_.block_size = o.block;
  config_.n_layer = o.layers;
  config_.n_head = o.heads;
  config_.n_embd = o.embd;
  config_.compute_dtype = cfg_.compute;
  manual_seed(o.seed);  // GPT-2's initialisation draws from the default generator
  model_ = nn::make_gpt(config_, cfg_.mode, o.backend);
  dp_ = std::make_unique<train::DataParallelRun>(
      *model_, train::RankPlace{cfg_.rank, cfg_.world, cfg_.local_rank, cfg_.local_world}, o.dist_timeout, false, o.grad_exchange);

  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::adamw;
  oc.lr = o.lr;
  oc.beta2 = 0.95;
  oc.weight_decay = o.weight_decay;
  nn::ParamGroup decay{"decay", {}, o.weight_decay}, no_decay{"no_decay", {}, 0.0};
  for (const auto& [name, t] : model_->module().named_parameters()) {
    const bool matrix = t.dim() >= 2 && !name.starts_with("wte.") && !name.starts_with("wpe.");
    (matrix ? decay : no_decay).params.emplace_back(name, t);
  }
  opt_ = std::make_unique<nn::Optimizer>(oc, std::vector<nn::ParamGroup>{decay, no_decay},
                                         nn::make_step_kernels(model_->mode(), o.backend));
  // Between backward and the optimizer's step, in every mode: the ranks' average, then the clip.
  if (o.clip > 0 || dp_->active())
    model_->set_gradient_hook([this, params = model_->module().parameters(), clip = o.clip] {
      dp_->average_gradients();
      if (clip > 0) nn::clip_grad_norm_(params, clip);
    });

  schedule_.base_lr = o.lr;
  schedule_.min_lr = o.min_lr;
  schedule_.total_steps = o.steps;
  // A run no longer than its warm-up is all warm-up.
  schedule_.kind = o.warmup < o.steps ? nn::ScheduleKind::cosine : nn::ScheduleKind::constant;
  schedule_.warmup_steps = std::min(o.warmup, o.steps);
  schedule_.warmup_start_factor = 1.0 / static_cast<double>(o.warmup);

  if (cfg_.rank == 0) {  // the only rank that writes
    train::TrainOptions guarded;
    guarded.checkpoint = o.checkpoint;
    guarded.metrics = o.metrics;
    guarded.resume = o.resume;
    uint64_t bytes = 0;  // the model, and AdamW's two moments of each parameter
    for (const auto& [n, t] : model_->state_dict()) bytes += 3 * t.nbytes();
    outputs_ = std::make_unique<train::GuardedOutputs>(guarded, corpus_.files, bytes + (1u << 16));
  }

  header_ = format("strata_gpt: data %s (%s) | backend %s (%s) | dispatch %s | precision %s | seed %llu\n",
                   o.data.c_str(), o.format.c_str(), o.backend.c_str(), cfg_.backend_note.c_str(), o.dispatch.c_str(),
                   o.precision.c_str(), static_cast<unsigned long long>(o.seed)) +
            header_;
  header_ += "model: " + model_->describe() + "\n";
  header_ += format("optimizer: %s | schedule: %s | clip %s | %lld steps of %lld x %lld tokens\n",
                    opt_->describe().c_str(), nn::describe(schedule_).c_str(),
                    o.clip > 0 ? format("global norm %g", o.clip).c_str() : "off", static_cast<long long>(o.steps),
                    static_cast<long long>(o.batch), static_cast<long long>(o.block));
  if (dp_->active())
    header_ += format("data parallel: %s; batch %lld per GPU, %lld in all; timeout %g s\n", dp_->describe().c_str(),
                      static_cast<long long>(o.batch), static_cast<long long>(o.batch * cfg_.world), o.dist_timeout);
  if (o.backend == "null")
    header_ += "note: backend null computes nothing: the losses of this run are whatever memory held, not results\n";
  say(header_);
  if (outputs_)
    for (const std::string& note : outputs_->notes()) warn(note + "\n");
  if (!o.resume.empty()) restore(o.resume);
}

GptTrainer::~GptTrainer() = default;

double GptTrainer::held_out_loss() {
  const GptOptions& o = cfg_.o;
  if (static_cast<int64_t>(corpus_.held_out.size()) <= o.block) return std::nan("");
  ops::TraceSpan span("evaluate");
  autograd::NoGradGuard no_grad;
  data::TextBatches held_out(corpus_.held_out, o.batch, o.block, o.seed + 2);
  double sum = 0;
  for (int64_t i = 0; i < o.eval_batches; ++i) {
    const auto [x, y] = held_out.next();
    sum += model_->forward_loss(x, y).loss.item();
  }
  return sum / static_cast<double>(o.eval_batches);
}

GptMetrics GptTrainer::evaluation_line(double train_seconds) {
  const GptOptions& o = cfg_.o;
  const std::vector<double> sums = dp_->sum({loss_sum_, static_cast<double>(loss_count_)});
  GptMetrics m;
  m.run_id = run_id_;
  m.step = step_;
  m.dataset = "text:" + o.format;
  m.model = "gpt";
  m.backend = o.backend;
  m.dispatch = o.dispatch;
  m.precision = o.precision;
  m.seed = o.seed;
  m.lr = opt_->lr();
  m.steps = o.steps;
  m.train_loss = sums[1] > 0 ? sums[0] / sums[1] : std::nan("");
  m.train_tokens = static_cast<int64_t>(sums[1]) * o.batch * o.block;
  const auto eval_start = Clock::now();
  m.test_loss = held_out_loss();
  m.eval_seconds = seconds_since(eval_start);
  m.test_tokens = std::isfinite(m.test_loss) ? o.eval_batches * o.batch * o.block : 0;
  m.train_seconds = train_seconds;
  m.peak_memory_bytes = static_cast<int64_t>(allocator_for(model_->device()).stats().peak_bytes);
  m.max_rss_bytes = train::max_rss_bytes();
  m.resumed = resumed_;
  m.time = train::iso8601_utc(std::chrono::system_clock::now());
  return m;
}

GptRunResult GptTrainer::run() {
  const GptOptions& o = cfg_.o;
  GptRunResult result;
  const int64_t stop_at = o.stop_after_steps > 0 ? step_ + o.stop_after_steps : -1;
  const int64_t tokens = o.batch * o.block;
  if (step_ >= o.steps)
    say(format("nothing to train: the run is at step %lld of --steps %lld (raise --steps to train longer)\n",
               static_cast<long long>(step_), static_cast<long long>(o.steps)));
  Allocator& alloc = allocator_for(model_->device());
  model_->train();
  while (step_ < o.steps && !result.interrupted) {
    // One stretch between evaluations: its progress bar, then the held-out loss and its lines.
    const int64_t begin = step_ / o.eval_every * o.eval_every;
    const int64_t end = std::min(o.steps, begin + o.eval_every);
    train::ProgressBar bar(progress_, o.progress, format("steps %lld-%lld", static_cast<long long>(begin + 1),
                                                         static_cast<long long>(end)),
                           end - begin, step_ - begin, "tok");
    alloc.reset_peak();
    const auto start = Clock::now();
    int64_t trained = 0;  // steps of this stretch that this call ran
    while (step_ < end) {
      const double lr = nn::lr_at(schedule_, step_);
      opt_->set_lr(lr);
      const auto [x, y] = batches_->next();
      ops::TraceSpan span("step");
      const double loss = model_->train_step(x, y, *opt_).loss.item();
      STRATA_CHECK(std::isfinite(loss) || o.backend == "null", "training diverged: loss is ", loss, " at step ",
                   step_ + 1, " (lr ", lr, "); ",
                   resumed_non_finite_.empty() ? "try a smaller --lr or a --clip"
                                               : "the run resumed from a checkpoint holding non-finite values (" +
                                                     resumed_non_finite_ + ")");
      result.losses.push_back(loss);
      loss_sum_ += loss;
      ++loss_count_;
      ++step_;
      ++trained;
      bar.update(step_ - begin, loss_sum_ / static_cast<double>(loss_count_), NAN, tokens);
      if (!o.checkpoint.empty() && o.checkpoint_every > 0 && step_ % o.checkpoint_every == 0 && step_ < o.steps)
        save(o.checkpoint);
      // A stop inside a stretch leaves its evaluation to the resumed run; one on its last step
      // evaluates first.
      if (step_ == stop_at && step_ < end) {
        result.interrupted = true;
        break;
      }
    }
    bar.finish();
    if (result.interrupted) break;
    const double train_seconds = seconds_since(start);
    GptMetrics m = evaluation_line(train_seconds);
    m.tokens_per_second = train_seconds > 0 ? static_cast<double>(trained * tokens * cfg_.world) / train_seconds : 0;
    if (!o.metrics.empty() && cfg_.rank == 0) train::append_json_line(o.metrics, to_json_line(m));
    say(format("step %lld/%lld  loss %.4f  held-out %.4f  lr %.2e  %.0f tokens/s\n", static_cast<long long>(step_),
               static_cast<long long>(o.steps), m.train_loss, m.test_loss, m.lr, m.tokens_per_second));
    result.lines.push_back(m);
    loss_sum_ = 0, loss_count_ = 0, resumed_ = false;
    if (step_ == stop_at && step_ < o.steps) result.interrupted = true;
  }
  if (result.interrupted) {
    if (!o.checkpoint.empty() && o.checkpoint_every == 0) save(o.checkpoint);
    say(format("stopped after %lld step%s of this run (--stop-after-steps; step %lld of %lld), as if interrupted%s\n",
               static_cast<long long>(o.stop_after_steps), o.stop_after_steps == 1 ? "" : "s",
               static_cast<long long>(step_), static_cast<long long>(o.steps),
               saved_step_ == step_ ? ("; checkpoint: " + o.checkpoint + " holds this step").c_str() : ""));
  } else if (!o.checkpoint.empty() && saved_step_ != step_ && !result.losses.empty()) {
    save(o.checkpoint);
    say("checkpoint: " + o.checkpoint + "\n");
  }
  result.steps = step_;
  return result;
}

std::string GptTrainer::sample() {
  const GptOptions& o = cfg_.o;
  if (o.sample == 0 || cfg_.rank != 0) return {};
  const std::vector<int32_t> prompt = tok_->encode(o.prompt);
  STRATA_CHECK(!prompt.empty(), "--prompt '", o.prompt, "' encodes to no token: the sample continues a prompt");
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>(prompt.begin(), prompt.end()),
                                         Shape{1, static_cast<int64_t>(prompt.size())});
  const nn::StateDict weights = model_->state_dict();
  std::vector<int64_t> out;
  // Decoding keeps a key/value cache, which the tape modes hold: a virtual-mode copy of the model.
  nn::with_policy(ops::DispatchMode::virtual_call, cfg_.o.backend, [&](const auto& p) {
    using P = std::decay_t<decltype(p)>;
    if constexpr (!nn::is_direct_v<P>) {
      nn::Gpt<P> g(p, config_);
      g.load_state_dict(weights);
      g.train(false);
      out = nn::generate(g, ids, {.new_tokens = o.sample, .temperature = o.temperature, .top_k = o.top_k,
                                  .seed = o.seed})
                .template to_vector<int64_t>();
    }
  });
  return tok_->decode(std::vector<int32_t>(out.begin(), out.end()));
}

}  // namespace strata::gpt
