#include "examples/gpt/gpt_metrics.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace strata::gpt {

std::string to_json_line(const GptMetrics& m) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::ordered_json j;
  j["steps"] = m.steps;
  j["train_loss"] = num(m.train_loss);
  j["test_loss"] = num(m.test_loss);
  j["train_tokens"] = m.train_tokens;
  j["test_tokens"] = m.test_tokens;
  j["train_seconds"] = num(m.train_seconds);
  j["eval_seconds"] = num(m.eval_seconds);
  j["tokens_per_second"] = num(m.tokens_per_second);
  j["peak_memory_bytes"] = m.peak_memory_bytes;
  j["max_rss_bytes"] = m.max_rss_bytes;
  j["resumed"] = m.resumed;
  return train::to_json_line(m, j.dump());
}

}  // namespace strata::gpt
