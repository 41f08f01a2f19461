// The trainer's metrics: average precision / mAP on fixed inputs (values checked
// against sklearn.metrics.average_precision_score), accuracy counting, and the
// contents of a metrics JSON line.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "examples/train/metrics.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

using train::average_precision;
using train::mean_average_precision;

TEST(TrainMetrics, AveragePrecisionMatchesSklearn) {
  // sklearn's documented example: average_precision_score([0,0,1,1], [.1,.4,.35,.8]) = 0.8333.
  const float s[] = {0.1f, 0.4f, 0.35f, 0.8f}, t[] = {0, 0, 1, 1};
  EXPECT_NEAR(*average_precision(s, t, 4), 5.0 / 6.0, 1e-12);
  // Perfect and reversed rankings.
  const float up[] = {0.1f, 0.2f, 0.3f, 0.4f}, pos_last[] = {0, 0, 1, 1}, pos_first[] = {1, 1, 0, 0};
  EXPECT_DOUBLE_EQ(*average_precision(up, pos_last, 4), 1.0);
  EXPECT_NEAR(*average_precision(up, pos_first, 4), 0.5 * (1.0 / 3.0) + 0.5 * 0.5, 1e-12);
  // Tied scores are one threshold: [.5,.5,.5,.2] with targets [1,0,0,1] ->
  // (R .5, P 1/3), then (R 1, P 1/2): AP = .5/3 + .5/2 (sklearn gives 0.41667).
  const float tie[] = {0.5f, 0.5f, 0.5f, 0.2f}, tie_t[] = {1, 0, 0, 1};
  EXPECT_NEAR(*average_precision(tie, tie_t, 4), 0.5 / 3.0 + 0.25, 1e-12);
  // No positive: undefined.
  const float none[] = {0, 0, 0, 0};
  EXPECT_FALSE(average_precision(up, none, 4).has_value());
}

TEST(TrainMetrics, MeanAveragePrecisionOverClassesSkipsClassesWithoutPositives) {
  // 4 items x 4 classes, row-major; columns are the cases above plus an empty class.
  const std::vector<float> scores = {0.9f, 0.1f,  0.5f, 0.3f,  //
                                     0.8f, 0.4f,  0.5f, 0.2f,  //
                                     0.7f, 0.35f, 0.5f, 0.9f,  //
                                     0.6f, 0.8f,  0.2f, 0.1f};
  const std::vector<float> targets = {1, 0, 1, 0,  //
                                      0, 0, 0, 0,  //
                                      1, 1, 0, 0,  //
                                      0, 1, 1, 0};
  // Class 0: (R .5, P 1), (R 1, P 2/3) -> 5/6; class 1: 5/6; class 2: 5/12; class 3: none.
  EXPECT_NEAR(mean_average_precision(scores, targets, 4, 4), (5.0 / 6 + 5.0 / 6 + 5.0 / 12) / 3, 1e-12);
  EXPECT_TRUE(std::isnan(mean_average_precision({0.1f, 0.2f}, {0, 0}, 2, 1)));
  EXPECT_THROW(mean_average_precision(scores, targets, 4, 3), Error);
}

train::EpochMetrics sample_metrics() {
  train::EpochMetrics m;
  m.run_id = "20261127T140305Z-3f9a2c";
  m.time = "2026-11-27T14:05:41Z";
  m.epoch = 2;
  m.epochs = 3;
  m.step = 1876;
  m.dataset = "fashion-mnist";
  m.model = "lenet";
  m.backend = "onednn";
  m.dispatch = "direct";
  m.precision = "fp32";
  m.seed = 7;
  m.lr = 0.025;
  m.train_loss = 0.31;
  m.train_accuracy = 0.885;
  m.test_loss = 0.29;
  m.test_accuracy = 0.8931;
  m.train_images = 60000;
  m.test_images = 10000;
  m.epoch_seconds = 51.5;
  m.train_seconds = 48.0;
  m.eval_seconds = 3.5;
  m.images_per_second = 1250.0;
  m.data_wait_seconds = 0.25;
  m.peak_memory_bytes = 123456789;
  m.max_rss_bytes = 987654321;
  return m;
}

TEST(TrainMetrics, JsonLineHoldsEveryField) {
  const std::string line = train::to_json_line(sample_metrics());
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j.at("run_id"), "20261127T140305Z-3f9a2c");
  EXPECT_EQ(j.at("time"), "2026-11-27T14:05:41Z");
  EXPECT_EQ(j.at("epoch"), 2);
  EXPECT_EQ(j.at("epochs"), 3);
  EXPECT_EQ(j.at("step"), 1876);
  EXPECT_EQ(j.at("dataset"), "fashion-mnist");
  EXPECT_EQ(j.at("model"), "lenet");
  EXPECT_EQ(j.at("backend"), "onednn");
  EXPECT_EQ(j.at("dispatch"), "direct");
  EXPECT_EQ(j.at("precision"), "fp32");
  EXPECT_EQ(j.at("seed"), 7);
  EXPECT_DOUBLE_EQ(j.at("lr").get<double>(), 0.025);
  EXPECT_DOUBLE_EQ(j.at("train_loss").get<double>(), 0.31);
  EXPECT_DOUBLE_EQ(j.at("train_accuracy").get<double>(), 0.885);
  EXPECT_DOUBLE_EQ(j.at("test_loss").get<double>(), 0.29);
  EXPECT_DOUBLE_EQ(j.at("test_accuracy").get<double>(), 0.8931);
  EXPECT_FALSE(j.contains("test_map"));
  EXPECT_EQ(j.at("train_images"), 60000);
  EXPECT_EQ(j.at("test_images"), 10000);
  EXPECT_DOUBLE_EQ(j.at("epoch_seconds").get<double>(), 51.5);
  EXPECT_DOUBLE_EQ(j.at("train_seconds").get<double>(), 48.0);
  EXPECT_DOUBLE_EQ(j.at("eval_seconds").get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(j.at("images_per_second").get<double>(), 1250.0);
  EXPECT_DOUBLE_EQ(j.at("data_wait_seconds").get<double>(), 0.25);
  EXPECT_EQ(j.at("peak_memory_bytes"), 123456789);
  EXPECT_EQ(j.at("max_rss_bytes"), 987654321);
  EXPECT_EQ(j.at("resumed"), false);
  EXPECT_EQ(j.size(), 26u);
}

TEST(TrainMetrics, TimesAreIso8601InUtcAndRunIdsAreTimeAndRandomSuffix) {
  using std::chrono::system_clock;
  EXPECT_EQ(train::iso8601_utc(system_clock::from_time_t(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(train::iso8601_utc(system_clock::from_time_t(1700000000)), "2023-11-14T22:13:20Z");
  const std::string a = train::new_run_id(), b = train::new_run_id();
  const std::regex form("[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}");
  EXPECT_TRUE(std::regex_match(a, form)) << a;
  EXPECT_TRUE(std::regex_match(b, form)) << b;
  EXPECT_NE(a, b);  // 24 random bits: a collision here has odds of 1 in 16.7 million
}

TEST(TrainMetrics, MultiLabelLinesCarryMapAndNullsForUndefinedValues) {
  train::EpochMetrics m = sample_metrics();
  m.dataset = "voc";
  m.multilabel = true;
  m.test_map = 0.61;
  m.train_accuracy = NAN;
  m.test_loss = NAN;
  const auto j = nlohmann::json::parse(train::to_json_line(m));
  EXPECT_DOUBLE_EQ(j.at("test_map").get<double>(), 0.61);
  EXPECT_FALSE(j.contains("test_accuracy"));
  EXPECT_TRUE(j.at("train_accuracy").is_null());
  EXPECT_TRUE(j.at("test_loss").is_null());
}

TEST(TrainMetrics, AppendWritesOneParsableLinePerCall) {
  const auto path = temp_dir("jsonl") / "metrics.jsonl";
  train::EpochMetrics m = sample_metrics();
  for (int e = 1; e <= 3; ++e) {
    m.epoch = e;
    train::append_json_line(path.string(), train::to_json_line(m));
  }
  std::ifstream f(path);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) EXPECT_EQ(nlohmann::json::parse(line).at("epoch"), ++n);
  EXPECT_EQ(n, 3);
  // A path below a regular file cannot be created.
  EXPECT_THROW(train::append_json_line((path.string() + "/metrics.jsonl"), "{}"), Error);
  EXPECT_THROW(train::check_appendable((path.string() + "/metrics.jsonl")), Error);
}

}  // namespace
}  // namespace strata::testing
