#pragma once
// Shared by the parts of study_resnet50 (bench/study/*.cpp): options, the (batch,
// resolution) points, the JSON record every implementation of the study writes, and
// the timing helpers. docs/study.md describes the record's fields; the Python peers
// (bench/peers/study_torch.py) and the LibTorch peer write the same ones.
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/backends/api/backend.h"
#include "strata/core/tensor.h"
#include "strata/ops/dispatch.h"
#include "stats.h"

namespace strata::study {

using json = nlohmann::json;

struct Point {
  int64_t batch = 0;
  int64_t resolution = 0;
  double cost() const { return static_cast<double>(batch) * static_cast<double>(resolution * resolution); }
};

// "8x64,32x32" (batch x resolution). Throws strata::Error on anything else.
std::vector<Point> parse_points(const std::string& s);
// The seed's table points (docs/study.md), the default when no --points is given.
const char* seed_points();

struct Options {
  std::string backend = "cuda";
  int warmup = 3;
  RepeatPolicy repeats;
  int h2d_repeats = 5;
  uint64_t seed = 1;
  double lr = 0.01;
  double deadline_s = 1e9;  // no measurement starts after this many seconds from start
  std::string json_path;
};

// Seconds since the program started (the deadline's clock).
double since_start_s();

bool is_oom(const std::string& what);
// 1 when any record failed with an error (out of memory is a finding of the study, not a failure),
// printing how many; else 0. What a driver's main returns.
int exit_status(const json& records, const char* driver);

// A CPU tensor of `sizes` in page-locked memory (the pinned host allocator the cuda
// backend installs; plain memory on CPU-only runs). Keeps the block until destroyed.
Tensor pinned_like(const Tensor& host);

// Host-to-device copy of `host` (pageable) and of a pinned copy of it into `dst`,
// timed separately from any step: {"bytes", "pageable_ms", "pinned_ms", "repeats"},
// medians of `repeats` copies each, from the call until the data is on the device
// (copy_into returns after staging a pageable source; a pinned one is waited for).
json time_h2d(const Tensor& host, const Tensor& dst, backends::Backend& be, int repeats);

json to_json(const Summary& s);

// The timed loop every implementation shares: `warmup` untimed steps, then steps
// until opt.repeats says stop, each timed by bench::StepTimer. Fills device_ms,
// host_ms, wall_ms, repeats, ms_per_sample, img_per_s, nvml, energy_mj_per_sample,
// check into `r`. `step(last)` runs one step and, when `last`, returns the check
// value's reader (the loss, or the logits' sum).
void run_timed(const Options& o, backends::Backend& be, int64_t batch,
               const std::function<std::function<double()>(bool)>& step, json& r);

// The NVML device for the current run (PCI bus id of CUDA device 0 when cuda).
void open_nvml(const json& device);
json nvml_info();

// Writes `doc` to `path` through a temporary and a rename, so a run cut off by a
// timeout leaves the last complete document.
void write_json(const std::string& path, const json& doc);

// Subcommands (study_resnet50.cpp wires them to the command line).
int run_sweep(const Options& o, const std::vector<Point>& points, const std::vector<std::string>& impls,
              const std::vector<std::string>& kinds);
int run_parity_data(const std::string& dir, int64_t n_train, int64_t n_test, int64_t resolution, uint64_t seed);
int run_parity(const Options& o, const std::string& dir, const std::vector<std::string>& impls, int64_t batch,
               int epochs);
int run_op_costs(const Options& o, Point p, const std::vector<std::string>& kinds);

}  // namespace strata::study
