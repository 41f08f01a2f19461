#pragma once
// Learning-rate schedules: a pure function of the step, so resuming from a saved
// step counter restores the rate exactly.
//  constant:  base
//  step:      base * gamma^floor(t / step_size)            (torch StepLR)
//  multistep: base * gamma^(number of milestones <= t)      (torch MultiStepLR)
//  cosine:    min + (base - min) * (1 + cos(pi * t / T)) / 2, t clamped to T
//             (torch CosineAnnealingLR, T = total_steps - warmup_steps)
// Linear warm-up (any kind): for the first warmup_steps steps the rate rises
// linearly from base * warmup_start_factor to base (torch LinearLR), and the schedule
// proper starts counting after it (t = step - warmup_steps).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::nn {

enum class ScheduleKind { constant, step, multistep, cosine };
ScheduleKind parse_schedule_kind(std::string_view s);  // "constant" | "step" | "multistep" | "cosine"

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::constant;
  double base_lr = 0.1;
  int64_t step_size = 30;           // step
  std::vector<int64_t> milestones;  // multistep
  double gamma = 0.1;               // step, multistep
  int64_t total_steps = 0;          // cosine (including warm-up)
  double min_lr = 0.0;              // cosine
  int64_t warmup_steps = 0;
  double warmup_start_factor = 0.0;
};

// The rate for step t (0-based: the rate used by the (t+1)-th optimizer step).
double lr_at(const ScheduleConfig& c, int64_t t);
std::string describe(const ScheduleConfig& c);

}  // namespace strata::nn
