// STRATA_TRACE for strata_train: a tiny run with the trace on, in each dispatch mode,
// written by write_trace_file as Chrome trace event JSON, parses (nlohmann-json) and
// holds the ops of the model as complete events ("ph": "X") with their backend, inside
// the program's "step" and "evaluate" spans.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "examples/train/trace_file.h"
#include "examples/train/trainer.h"
#include "strata/ops/trace.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

class TraceOn {
 public:
  TraceOn() {
    ops::take_trace();
    ops::take_spans();
    ops::set_trace_enabled(true);
  }
  ~TraceOn() {
    ops::set_trace_enabled(false);
    ops::take_trace();
    ops::take_spans();
  }
};

class TrainTrace : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainTrace, IsChromeTraceJsonWithTheOpsInsideTheSpans) {
  const auto dir = temp_dir(std::string("trace_") + GetParam());
  write_synthetic_idx(dir / "data", 32, 16, 3);
  train::TrainOptions o = tiny_options((dir / "data").string(), "reference", GetParam());
  o.epochs = 1;
  o.batch_size = 16;
  o.eval_batch_size = 16;
  const std::string path = (dir / "trace.json").string();
  ::setenv("STRATA_TRACE_FILE", path.c_str(), 1);
  {
    TraceOn on;
    train::Trainer t(train::resolve(o), nullptr, nullptr);
    t.run();
    EXPECT_EQ(train::write_trace_file("strata_train", nullptr), path);
  }
  ::unsetenv("STRATA_TRACE_FILE");

  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << path;
  const nlohmann::json j = nlohmann::json::parse(f);  // throws, failing the test, unless it is JSON
  ASSERT_TRUE(j.at("traceEvents").is_array());
  std::set<std::string> ops, spans;
  std::vector<std::pair<double, double>> steps;
  struct Op {
    double ts, dur;
  };
  std::vector<Op> op_events;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M") continue;  // the process name
    ASSERT_EQ(e.at("ph"), "X") << e.dump();
    const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
    EXPECT_GE(ts, 0.0);
    EXPECT_GE(dur, 0.0);
    EXPECT_EQ(e.at("pid"), 1);
    if (e.at("cat") == "op") {
      ops.insert(e.at("name").get<std::string>());
      EXPECT_EQ(e.at("args").at("backend"), "reference") << e.dump();
      op_events.push_back({ts, dur});
    } else {
      ASSERT_EQ(e.at("cat"), "span") << e.dump();
      spans.insert(e.at("name").get<std::string>());
      if (e.at("name") == "step") steps.emplace_back(ts, ts + dur);
    }
  }
  for (const char* op : {"conv2d_fwd", "conv2d_bwd_weight", "linear_fwd", "relu_fwd", "max_pool2d_fwd",
                         "softmax_xent_fwd", "multi_sgd_step"})
    EXPECT_TRUE(ops.count(op)) << op << " missing from the trace of " << GetParam() << " mode";
  EXPECT_EQ(spans, (std::set<std::string>{"step", "evaluate"}));
  EXPECT_EQ(steps.size(), 2u);  // 32 images, batch 16
  // Every training step's ops lie inside its span.
  int64_t inside = 0;
  for (const Op& op : op_events)
    for (const auto& [a, b] : steps) inside += op.ts >= a && op.ts + op.dur <= b;
  EXPECT_GT(inside, 20) << "few ops inside the step spans";
}

INSTANTIATE_TEST_SUITE_P(Modes, TrainTrace, ::testing::Values("virtual", "static", "direct"));

TEST(TrainTrace, OffWritesNothing) {
  ops::set_trace_enabled(false);
  EXPECT_EQ(train::trace_file_path("strata_train"), "");
  EXPECT_EQ(train::write_trace_file("strata_train", nullptr), "");
}

}  // namespace
}  // namespace strata::testing
