#pragma once
// A one-line progress bar for an epoch:
//   epoch 2/3 [##########.........] 412/938  loss 0.3125  acc 88.41%  2510 img/s  eta 0:21
// On a terminal the line is redrawn in place (at most every 100 ms); otherwise (a log
// file, CI) a plain line is printed at every tenth of the epoch. Written to the given
// stream (stderr by strata_train, so stdout stays a clean log).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace strata::train {

class ProgressBar {
 public:
  // total: batches in the epoch; start: batches already done (a resumed epoch); unit: what a
  // batch's items are called in the rate ("img/s", "tok/s").
  ProgressBar(std::FILE* out, bool enabled, std::string label, int64_t total, int64_t start = 0,
              std::string unit = "img");
  // After each batch: running mean loss, running accuracy (NaN: not shown), and the
  // number of items (images, tokens) in the batch.
  void update(int64_t done, double loss, double accuracy, int64_t images);
  // Ends the line (final redraw on a terminal).
  void finish();

  // "1:02:03" / "2:03".
  static std::string format_duration(double seconds);

 private:
  std::string render(int64_t done, double loss, double accuracy) const;

  std::FILE* out_;
  bool enabled_, tty_;
  std::string label_, unit_;
  int64_t total_, start_, images_ = 0, last_decile_ = -1;
  double loss_ = 0, accuracy_ = 0;
  int64_t done_ = 0;
  std::chrono::steady_clock::time_point t0_, last_draw_;
};

}  // namespace strata::train
