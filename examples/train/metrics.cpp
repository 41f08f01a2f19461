#include "examples/train/metrics.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "strata/core/error.h"

namespace strata::train {

std::optional<double> average_precision(const float* scores, const float* targets, int64_t n, int64_t stride) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Stable, so the result does not depend on the sort's treatment of ties (ties are
  // grouped below anyway).
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return scores[a * stride] > scores[b * stride]; });
  int64_t positives = 0;
  for (int64_t i = 0; i < n; ++i) positives += targets[i * stride] > 0.5f;
  if (positives == 0) return std::nullopt;
  double ap = 0, prev_recall = 0;
  int64_t tp = 0, seen = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = order[static_cast<size_t>(k)];
    tp += targets[i * stride] > 0.5f;
    ++seen;
    const bool last_of_threshold =
        k + 1 == n || scores[order[static_cast<size_t>(k + 1)] * stride] != scores[i * stride];
    if (!last_of_threshold) continue;
    const double recall = static_cast<double>(tp) / static_cast<double>(positives);
    const double precision = static_cast<double>(tp) / static_cast<double>(seen);
    ap += (recall - prev_recall) * precision;
    prev_recall = recall;
  }
  return ap;
}

double mean_average_precision(const std::vector<float>& scores, const std::vector<float>& targets, int64_t n,
                              int64_t classes) {
  STRATA_CHECK(static_cast<int64_t>(scores.size()) == n * classes && scores.size() == targets.size(),
               "mean_average_precision: scores (", scores.size(), ") and targets (", targets.size(), ") must both hold ",
               n, " x ", classes, " values");
  double sum = 0;
  int64_t counted = 0;
  for (int64_t c = 0; c < classes; ++c) {
    if (auto ap = average_precision(scores.data() + c, targets.data() + c, n, classes)) {
      sum += *ap;
      ++counted;
    }
  }
  return counted ? sum / static_cast<double>(counted) : std::nan("");
}

namespace {
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::ordered_json run_fields(const RunFields& f) {
  nlohmann::ordered_json j;
  j["run_id"] = f.run_id;
  j["time"] = f.time;
  j["step"] = f.step;
  j["dataset"] = f.dataset;
  j["model"] = f.model;
  j["backend"] = f.backend;
  j["dispatch"] = f.dispatch;
  j["precision"] = f.precision;
  j["seed"] = f.seed;
  j["lr"] = num(f.lr);
  return j;
}
}  // namespace

std::string to_json_line(const RunFields& f, const std::string& rest) {
  nlohmann::ordered_json j = run_fields(f);
  const nlohmann::ordered_json more = nlohmann::ordered_json::parse(rest);
  for (const auto& [key, value] : more.items()) j[key] = value;
  return j.dump();
}

std::string to_json_line(const EpochMetrics& m) {
  nlohmann::ordered_json j = run_fields(m);
  j["epoch"] = m.epoch;
  j["epochs"] = m.epochs;
  j["train_loss"] = num(m.train_loss);
  j["train_accuracy"] = m.multilabel ? nlohmann::json(nullptr) : num(m.train_accuracy);
  j["test_loss"] = num(m.test_loss);
  if (m.multilabel)
    j["test_map"] = num(m.test_map);
  else
    j["test_accuracy"] = num(m.test_accuracy);
  j["train_images"] = m.train_images;
  j["test_images"] = m.test_images;
  j["epoch_seconds"] = num(m.epoch_seconds);
  j["train_seconds"] = num(m.train_seconds);
  j["eval_seconds"] = num(m.eval_seconds);
  j["images_per_second"] = num(m.images_per_second);
  j["data_wait_seconds"] = num(m.data_wait_seconds);
  j["peak_memory_bytes"] = m.peak_memory_bytes;
  j["max_rss_bytes"] = m.max_rss_bytes;
  j["resumed"] = m.resumed;
  return j.dump();
}

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
  const std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&s, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string new_run_id() {
  const std::time_t s = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&s, &utc);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &utc);
  std::random_device rd;
  std::snprintf(buf + n, sizeof buf - n, "-%06x", static_cast<unsigned>(rd() & 0xFFFFFFu));
  return buf;
}

namespace {
std::ofstream open_for_append(const std::string& path) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream f(path, std::ios::app);
  STRATA_CHECK(f.good(), "metrics: cannot open '", path, "' for appending");
  return f;
}
}  // namespace

void check_appendable(const std::string& path) { open_for_append(path); }

void append_json_line(const std::string& path, const std::string& line) {
  std::ofstream f = open_for_append(path);
  f << line << '\n';
  f.flush();
  STRATA_CHECK(f.good(), "metrics: writing to '", path, "' failed");
}

int64_t max_rss_bytes() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace strata::train
