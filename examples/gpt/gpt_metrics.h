#pragma once
// strata_gpt's metrics: one JSON object per line, appended at every held-out evaluation (every
// --eval-every steps and at the run's last step), so a resumed run keeps adding to the same
// file. The line starts with the keys of every trainer's lines (train::RunFields: run_id, time,
// step, dataset, model, backend, dispatch, precision, seed, lr: examples/train/metrics.h), then:
//   steps (the run's total), train_loss (the mean loss of the steps since the previous line),
//   test_loss (the held-out loss: the mean of --eval-batches batches), train_tokens (tokens
//   trained on since the previous line, all ranks), test_tokens, train_seconds, eval_seconds,
//   tokens_per_second (train_tokens over train_seconds), peak_memory_bytes (strata's allocator
//   on the model's device, since the previous line), max_rss_bytes, resumed (whether the run
//   resumed from a checkpoint since the previous line).
// NaN (no held-out text) is written as null.
#include <cstdint>
#include <string>

#include "examples/train/metrics.h"

namespace strata::gpt {

struct GptMetrics : train::RunFields {
  int64_t steps = 0;
  double train_loss = 0, test_loss = 0;
  int64_t train_tokens = 0, test_tokens = 0;
  double train_seconds = 0, eval_seconds = 0, tokens_per_second = 0;
  int64_t peak_memory_bytes = 0, max_rss_bytes = 0;
  bool resumed = false;
};

// One JSON object, without a trailing newline.
std::string to_json_line(const GptMetrics& m);

}  // namespace strata::gpt
