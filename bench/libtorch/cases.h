#pragma once
// Internal to bench/libtorch: what the three sides of libtorch_cpu_bench (strata,
// LibTorch, the raw libraries) hand to the timing loop. The strata and LibTorch
// sides live in separate translation units so that neither sees the other's
// headers (and editing one does not recompile LibTorch's).
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata_bench {

enum class Kind { resnet_infer, resnet_train, conv_fwd, conv_train, relu, tensor_add, lenet_infer };

// One workload; every side builds its cases for it.
struct Workload {
  std::string name;
  Kind kind;
  int64_t batch = 1, resolution = 224;  // ResNet-50 (ImageNet stem, 1000 classes); LeNet: 1 and 28
  int64_t numel = 64;                   // relu, tensor_add
  double flops = 0;                     // per step, 0 when not reported
  int warmup = 2;                       // untimed steps of each case before the first round
  int rounds = 5;                       // cases take turns: round-robin, `rounds` times
  int samples_per_round = 2;            // timed samples of a case in each turn
  int calls_per_sample = 1;             // a sample's time is the mean over this many calls
  int warm_calls_per_turn = 0;          // untimed calls at the start of each turn
  bool bf16 = false;                    // bf16 compute (f32 accumulation); strata: backends with bf16
                                        // convs, and ResNet in the tape modes only
  bool lenet_keras = false;             // LeNet: nn/lenet.h's keras variant (else its tensorflow one)
};

// One timed thing: `step` runs one call; the state it needs is in the closure.
struct Case {
  std::string impl;     // strata | libtorch | raw
  std::string backend;  // strata: onednn | openblas | eigen; raw: the library; libtorch: ""
  std::string mode;     // strata: virtual | static | direct (+grad: with the tape);
                        // libtorch: no_grad | grad
  std::function<void()> step;
  // strata's tape modes: one step under the op trace, as "op count x mean us" by
  // total time (empty elsewhere); --trace prints it.
  std::function<std::string()> trace;
  // Workloads whose sides compute the same function (lenet_infer): the step's result as floats, read
  // after timing; libtorch_cpu_bench compares every case's with the first one's and fails on a mismatch.
  std::function<std::vector<float>()> output = {};
};

// The ops of conv3x3: 3x3, pad 1, N=8, C=K=64, 56x56 (ResNet-50's conv2_x).
inline constexpr int64_t kConvN = 8, kConvC = 64, kConvK = 64, kConvHW = 56;

// Deterministic values in [-1, 1) (no zeros in bulk, no denormals).
inline float bench_value(int64_t i, float scale) {
  return scale * static_cast<float>((i * 7919) % 1000 - 500) / 500.0f;
}

// LeNet-5 as nn/lenet.h builds it (Gu, Gozum & Lam's two variants), for lenet_infer: both sides fill
// their parameters, in this order, with bench_value(i, 1/sqrt(fan_in)), so they compute the same
// function. conv1 -> relu -> pool 2 -> conv2 -> relu -> pool 2 -> flatten -> fc1 -> relu -> fc2.
struct LeNetShape {
  int64_t c1, c2, hidden, pad;
  int64_t flat() const {
    const int64_t s = ((28 + 2 * pad - 4) / 2 + 2 * pad - 4) / 2;
    return c2 * s * s;
  }
};
inline LeNetShape lenet_shape(bool keras) { return keras ? LeNetShape{5, 12, 128, 0} : LeNetShape{32, 64, 1024, 2}; }
inline constexpr int64_t kLeNetClasses = 10;
// The scale of a parameter's fill: 1/sqrt(fan_in) for a weight ([out, in...]), 0.1 for a bias.
inline float lenet_fill_scale(int64_t numel, int64_t dim0, int64_t ndim) {
  return ndim > 1 ? 1.0f / std::sqrt(static_cast<float>(numel / dim0)) : 0.1f;
}

std::vector<Case> strata_cases(const Workload& w, const std::vector<std::string>& backends,
                               const std::vector<std::string>& modes);
// With a folder of export_torchscript.py's files (libtorch_use_torchscript), ResNet-50
// inference gains LibTorch's deployment form: the TorchScript module frozen and passed through
// torch::jit::optimize_for_inference (conv-batch-norm folding, oneDNN layouts).
std::vector<Case> libtorch_cases(const Workload& w);
void libtorch_use_torchscript(const std::string& folder);
std::vector<Case> raw_cases(const Workload& w);

// Thread setup and the lines that describe each side's configuration.
void libtorch_set_threads(int n);
int libtorch_threads();
std::string libtorch_describe();
std::vector<std::string> strata_describe();
std::vector<std::string> raw_describe();
int openblas_threads();  // -1 without OpenBLAS

}  // namespace strata_bench
