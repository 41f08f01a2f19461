#pragma once
// Evaluation metrics and the per-epoch metrics record.
//
// The metrics file holds one JSON object per line (JSON lines), appended after every
// epoch, so a run that is resumed keeps adding to the same file. Keys of a line:
//   run_id (the same on every line of one run, resumed or not: its start time and a
//   random suffix, "20261127T140305Z-3f9a2c"), time (when the line was written, ISO
//   8601 in UTC, "2026-11-27T14:05:41Z"), step (optimizer steps so far), dataset, model,
//   backend, dispatch, precision, seed, lr (the rate of the epoch's last step) (RunFields:
//   every trainer's lines start so), epoch (1-based), epochs, train_loss, train_accuracy (null for multi-label), test_loss,
//   test_accuracy (classification) or test_map (multi-label), train_images,
//   test_images, epoch_seconds, train_seconds, eval_seconds, images_per_second
//   (training images per second of train_seconds), data_wait_seconds,
//   peak_memory_bytes (strata's allocator on the model's device, this epoch),
//   max_rss_bytes (the process's peak resident set), resumed (whether the epoch was
//   continued from a mid-epoch checkpoint).
// Losses and accuracies are fractions (accuracy 0.9 = 90 %); NaN is written as null.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::train {

// Average precision of one class, as sklearn.metrics.average_precision_score: with
// the items sorted by decreasing score, AP = sum over distinct score thresholds of
// (recall_n - recall_{n-1}) * precision_n (no interpolation; tied scores form one
// threshold). Targets are 0/1. Returns nullopt when the class has no positive.
std::optional<double> average_precision(const float* scores, const float* targets, int64_t n, int64_t stride = 1);

// Mean over classes of average_precision for row-major [n, classes] scores and 0/1
// targets; classes without a positive are left out of the mean (as VOC's devkit
// does for a class absent from the test set). NaN when no class has a positive.
double mean_average_precision(const std::vector<float>& scores, const std::vector<float>& targets, int64_t n,
                              int64_t classes);

// The keys every trainer's metrics line starts with (strata_train's per epoch, strata_gpt's per
// evaluation: examples/gpt/gpt_metrics.h), so one reader plots both.
struct RunFields {
  std::string run_id, time;
  int64_t step = 0;
  std::string dataset, model, backend, dispatch, precision;
  uint64_t seed = 0;
  double lr = 0;
};

struct EpochMetrics : RunFields {
  int64_t epoch = 0;  // 1-based
  int64_t epochs = 0;
  double train_loss = 0, train_accuracy = 0;  // train_accuracy NaN for multi-label
  double test_loss = 0;
  double test_accuracy = 0;  // classification
  double test_map = 0;       // multi-label
  bool multilabel = false;
  int64_t train_images = 0, test_images = 0;
  double epoch_seconds = 0, train_seconds = 0, eval_seconds = 0, images_per_second = 0, data_wait_seconds = 0;
  int64_t peak_memory_bytes = 0, max_rss_bytes = 0;
  bool resumed = false;
};

// "2026-11-27T14:05:41Z": `t` in ISO 8601, UTC, to the second.
std::string iso8601_utc(std::chrono::system_clock::time_point t);
// A new run id: the current time (UTC, ISO 8601's basic format) and 24 random bits.
std::string new_run_id();

// One JSON object, without a trailing newline.
std::string to_json_line(const EpochMetrics& m);
// The common keys and then `rest`'s (a JSON object's text, "{...}"), as one line.
std::string to_json_line(const RunFields& f, const std::string& rest);
// Appends the line and a newline to `path` (created, with its directories, if absent)
// and flushes; throws
// strata::Error naming the file when it cannot be written.
void append_json_line(const std::string& path, const std::string& line);
// Throws as append_json_line would, writing nothing (checked before training starts).
void check_appendable(const std::string& path);

// The process's peak resident set size in bytes (getrusage), 0 where unknown.
int64_t max_rss_bytes();

}  // namespace strata::train
