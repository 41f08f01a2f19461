#pragma once
// The op trace (ops/trace.h) summed per op for a benchmark's JSON: calls, total and mean
// microseconds, the costliest op first. Shared by the ResNet-50 and GPT benchmarks.
#include <nlohmann/json.hpp>
#include <vector>

#include "strata/ops/trace.h"

namespace strata::bench {

nlohmann::json summarize_trace(const std::vector<ops::TraceEvent>& events);

}  // namespace strata::bench
