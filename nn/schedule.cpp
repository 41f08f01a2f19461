#include "strata/nn/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "strata/core/error.h"

namespace strata::nn {

ScheduleKind parse_schedule_kind(std::string_view s) {
  if (s == "constant") return ScheduleKind::constant;
  if (s == "step") return ScheduleKind::step;
  if (s == "multistep") return ScheduleKind::multistep;
  if (s == "cosine") return ScheduleKind::cosine;
  STRATA_FAIL("schedule: unknown kind '", s, "' (known: constant, step, multistep, cosine)");
}

double lr_at(const ScheduleConfig& c, int64_t t) {
  STRATA_CHECK(t >= 0, "schedule: step must be >= 0, got ", t);
  if (t < c.warmup_steps) {
    const double f = c.warmup_start_factor +
                     (1.0 - c.warmup_start_factor) * static_cast<double>(t) / static_cast<double>(c.warmup_steps);
    return c.base_lr * f;
  }
  const int64_t s = t - c.warmup_steps;
  switch (c.kind) {
    case ScheduleKind::constant: return c.base_lr;
    case ScheduleKind::step:
      STRATA_CHECK(c.step_size > 0, "schedule: step_size must be > 0, got ", c.step_size);
      return c.base_lr * std::pow(c.gamma, static_cast<double>(s / c.step_size));
    case ScheduleKind::multistep: {
      const auto passed = std::count_if(c.milestones.begin(), c.milestones.end(), [&](int64_t m) { return m <= s; });
      return c.base_lr * std::pow(c.gamma, static_cast<double>(passed));
    }
    case ScheduleKind::cosine: {
      const int64_t span = c.total_steps - c.warmup_steps;
      STRATA_CHECK(span > 0, "schedule: cosine needs total_steps (", c.total_steps, ") > warmup_steps (",
                   c.warmup_steps, ")");
      const double x = static_cast<double>(std::min(s, span)) / static_cast<double>(span);
      return c.min_lr + (c.base_lr - c.min_lr) * (1.0 + std::cos(std::numbers::pi * x)) / 2.0;
    }
  }
  return c.base_lr;
}

std::string describe(const ScheduleConfig& c) {
  char buf[256];
  switch (c.kind) {
    case ScheduleKind::constant: std::snprintf(buf, sizeof buf, "constant lr %g", c.base_lr); break;
    case ScheduleKind::step:
      std::snprintf(buf, sizeof buf, "step lr %g x%g every %lld steps", c.base_lr, c.gamma,
                    static_cast<long long>(c.step_size));
      break;
    case ScheduleKind::multistep:
      std::snprintf(buf, sizeof buf, "multistep lr %g x%g at %zu milestones", c.base_lr, c.gamma, c.milestones.size());
      break;
    case ScheduleKind::cosine:
      std::snprintf(buf, sizeof buf, "cosine lr %g -> %g over %lld steps", c.base_lr, c.min_lr,
                    static_cast<long long>(c.total_steps));
      break;
  }
  std::string s = buf;
  if (c.warmup_steps > 0)
    s += ", linear warm-up " + std::to_string(c.warmup_steps) + " steps from x" + std::to_string(c.warmup_start_factor);
  return s;
}

}  // namespace strata::nn
