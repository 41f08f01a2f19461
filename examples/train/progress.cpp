#include "examples/train/progress.h"

#include <unistd.h>

#include <cmath>

namespace strata::train {

ProgressBar::ProgressBar(std::FILE* out, bool enabled, std::string label, int64_t total, int64_t start,
                         std::string unit)
    : out_(out),
      enabled_(enabled && out != nullptr),
      tty_(enabled_ && ::isatty(::fileno(out)) != 0),
      label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      start_(start),
      done_(start),
      t0_(std::chrono::steady_clock::now()),
      last_draw_(t0_) {}

std::string ProgressBar::format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  return buf;
}

std::string ProgressBar::render(int64_t done, double loss, double accuracy) const {
  constexpr int kWidth = 24;
  const double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  std::string bar(kWidth, '.');
  for (int i = 0; i < static_cast<int>(frac * kWidth + 1e-9) && i < kWidth; ++i) bar[static_cast<size_t>(i)] = '#';
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double ips = secs > 0 ? static_cast<double>(images_) / secs : 0.0;
  const int64_t run = done - start_;
  const double eta = run > 0 ? secs / static_cast<double>(run) * static_cast<double>(total_ - done) : NAN;
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "%s [%s] %lld/%lld  loss %.4f", label_.c_str(), bar.c_str(),
                        static_cast<long long>(done), static_cast<long long>(total_), loss);
  if (std::isfinite(accuracy) && n > 0 && n < static_cast<int>(sizeof buf))
    n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), "  acc %.2f%%", 100.0 * accuracy);
  if (n > 0 && n < static_cast<int>(sizeof buf))
    std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), "  %.0f %s/s  %s %s", ips, unit_.c_str(),
                  done >= total_ ? "took" : "eta", format_duration(done >= total_ ? secs : eta).c_str());
  return buf;
}

void ProgressBar::update(int64_t done, double loss, double accuracy, int64_t images) {
  done_ = done;
  loss_ = loss;
  accuracy_ = accuracy;
  images_ += images;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100) && done < total_) return;
    last_draw_ = now;
    std::fprintf(out_, "\r%s\033[K", render(done, loss, accuracy).c_str());
    std::fflush(out_);
  } else {
    const int64_t decile = total_ > 0 ? done * 10 / total_ : 10;
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(out_, "%s\n", render(done, loss, accuracy).c_str());
    std::fflush(out_);
  }
}

void ProgressBar::finish() {
  if (!enabled_) return;
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K\n", render(done_, loss_, accuracy_).c_str());
  } else if (last_decile_ != 10) {
    std::fprintf(out_, "%s\n", render(done_, loss_, accuracy_).c_str());
  }
  std::fflush(out_);
}

}  // namespace strata::train
