#pragma once
// What the ResNet-50 GPU programs share (bench/resnet50_gpu.cpp and the abstraction-
// cost study's driver, bench/study/): the step timer, the random inputs, the device
// description (and, through trace_summary.h, the op-trace summary). Built with the cuda backend only, as they are.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/backends/api/backend.h"
#include "strata/core/tensor.h"
#include "strata/nn/model.h"
#include "strata/ops/trace.h"
#include "trace_summary.h"

namespace strata::bench {

constexpr int64_t kImageNetClasses = 1000;

// Throws std::runtime_error naming `what` when a CUDA runtime call failed.
void cuda_check(int cuda_error, const char* what);

// One step's device time by CUDA events on `stream` (cuda), or the step's wall time
// after a synchronize (CPU backends), plus enqueue and wall time by steady_clock.
class StepTimer {
 public:
  using Clock = std::chrono::steady_clock;
  StepTimer(bool cuda, void* stream, backends::Backend& be);
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  void begin();
  void enqueued();
  // Waits for the step; returns {device_ms, host_ms, wall_ms}.
  std::array<double, 3> finish();

 private:
  bool cuda_;
  backends::Backend& be_;
  void* stream_ = nullptr;
  void* start_ = nullptr;
  void* end_ = nullptr;
  Clock::time_point t0_, t1_;
};

// Uniform in [-1.7, 1.7) (variance ~1), never zeros in bulk: [batch, 3, res, res] on
// the CPU in `fmt`.
Tensor random_images(int64_t batch, int64_t resolution, MemoryFormat fmt, uint64_t seed);
// Labels in [0, classes).
Tensor random_labels(int64_t n, uint64_t seed, int64_t classes = kImageNetClasses);

// {"name", "sm_count", "memory_bytes", "compute_capability", "cuda_runtime",
// "cuda_driver", "pci_bus_id"} of device 0, or {"name": "cpu"}.
nlohmann::json device_info(bool cuda);

// torchvision's ResNet-50 (1000 classes, kaiming_normal_fan_out, seed 0) in `mode` on
// `backend`; `fmt` nn::ModelOptions::memory_format (nullopt: the backend's choice);
// `compute` = bf16/f16 for mixed precision (nn::ModelOptions::compute_dtype);
// `fuse`: nn::ResNetConfig::fuse_eval and fuse_train; `fold`, `s2d_stem`, `winograd`:
// nn::ResNetConfig::fold_batch_norm, space_to_depth_stem, winograd (unset: the model's
// defaults for the backend's device).
std::unique_ptr<nn::Model> make_resnet50(ops::DispatchMode mode, const std::string& backend,
                                         std::optional<MemoryFormat> fmt = MemoryFormat::contiguous,
                                         std::optional<DType> compute = std::nullopt, bool fuse = true,
                                         std::optional<bool> fold = std::nullopt,
                                         std::optional<bool> s2d_stem = std::nullopt,
                                         std::optional<bool> winograd = std::nullopt);
// The benchmarks' optimizer: SGD, momentum 0.9, dampening 0, no weight decay.
nn::OptimizerConfig sgd_config(double lr);

// One benchmark step of `model` on the prepared input and labels: a training step
// (zero_grad, forward, cross-entropy, backward, optimizer) when `opt` is given, else
// an inference forward without the tape. step(read) enqueues the step and, when
// `read`, returns the reader of its check value (the loss, or the logits' sum), to be
// called after timing since reading synchronises.
using Step = std::function<std::function<double()>(bool read)>;
Step make_step(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer* opt);

// The op trace of one step (tape modes): host time inside the backend per op,
// summed by op name, largest first.
}  // namespace strata::bench
