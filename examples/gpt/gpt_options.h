#pragma once
// strata_gpt's command line: the options, their CLI11 definitions and their resolution (backend,
// dispatch mode, precision, data parallel), kept apart from main() so tests parse command lines
// and check the messages. The conventions are strata_train's (examples/train/options.h): the same
// option names where the meaning is the same (--dispatch, --precision, --checkpoint,
// --checkpoint-every, --resume, --metrics, --stop-after-steps, --threads, --nproc, ...), a usage
// error (exit status 2) for what the command line asks that this build cannot honour.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "strata/core/dtype.h"
#include "strata/ops/dispatch.h"

namespace CLI {
class App;
}

namespace strata::gpt {

struct GptOptions {
  // The corpus and its tokens.
  std::string data, suffix, format = "plain", tokenizer = "byte", bpe_dir;
  double held_out = 0.1;
  // The model.
  int64_t block = 64, layers = 2, heads = 4, embd = 64;
  // How it runs.
  std::string backend;  // "" -> the best CPU backend built
  std::string dispatch = "virtual";  // the README command's tape loop before nn::Model; direct measured no faster on 2 vCPUs
  std::string precision = "fp32";
  // Training: AdamW (beta2 0.95) without decay on biases, layer norms and embeddings, a cosine
  // schedule after a linear warm-up, gradients clipped to a global norm (nanoGPT's recipe).
  int64_t steps = 300, batch = 8, warmup = 30;
  double lr = 3e-3, min_lr = 3e-4, weight_decay = 0.1, clip = 1.0;
  uint64_t seed = 0;
  int64_t eval_every = 100, eval_batches = 4;
  // Outputs and resume.
  std::string checkpoint, resume, metrics;
  int64_t checkpoint_every = 0, stop_after_steps = 0;
  bool allow_non_finite = false;
  bool progress = true;
  int threads = 0;
  int nproc = 1;
  double dist_timeout = 300;
  std::string grad_exchange;  // data parallel: "" (the parameters' dtype), "bf16" or "f16"
  // Sampling after training.
  std::string prompt = "The";
  int64_t sample = 200, top_k = 40;
  double temperature = 0.8;
};

// Everything the trainer needs, with every default resolved and checked.
struct GptRunConfig {
  GptOptions o;
  ops::DispatchMode mode = ops::DispatchMode::direct;
  std::optional<DType> compute;  // --precision's compute dtype (nullopt: f32)
  std::string backend_note;      // why this backend
  int rank = 0, world = 1, local_rank = 0, local_world = 1;  // data parallel (examples/train/data_parallel_start.h)
};

std::unique_ptr<CLI::App> make_gpt_cli(GptOptions& o);

// Fills the defaults and checks what the parser cannot: a backend that is not built, graph mode
// off cuda, a precision the backend's matrix products do not run, --tokenizer and --bpe-dir
// apart, --embd not a multiple of --heads, clipping with fp16's loss scaling, --nproc off cuda.
// Throws train::UsageError naming the option and its value.
GptRunConfig resolve_gpt(const GptOptions& o);

}  // namespace strata::gpt
