// resnet50_gpu: ResNet-50 (torchvision v1.5, 1000 classes, ImageNet stem) on the cuda
// backend, in each dispatch mode, timed as bench/peers/pytorch_resnet50.py times
// PyTorch eager, so that bench/peers/compare.py can print strata / PyTorch per
// configuration and mode (tools/gpu/bench.sh runs all three in one device call).
//
//   resnet50_gpu --mode all --config all --iters 30 --warmup 5 --json strata.json
//
// Configurations are named <kind>_b<batch>_<resolution>[_nhwc][_bf16]:
//   infer_b1_224, infer_b256_224         inference (eval, no tape), f32 NCHW
//   train_b128_32, train_b128_224        training step, f32 NCHW
//   train_b128_224_nhwc                  training step, f32 channels-last
//   train_b256_224_nhwc_bf16             bf16 mixed precision, channels-last (PyTorch's
//                                        autocast): strata's nn has no mixed-precision
//                                        path yet, so it is reported "not_supported".
// A training step is zero_grad + forward + cross-entropy + backward + SGD (momentum
// 0.9, lr 0.01) on random inputs and random labels (never zeros).
//
// Protocol per (configuration, mode): a fresh model (kaiming_normal_fan_out, seed 0),
// inputs written once into the model's input buffer, `warmup` untimed steps, then
// `iters` timed steps (at least 20; stops early, but not under 20, once --max-seconds
// have passed). Each timed step records
//   device_ms  CUDA events on the backend's stream around the step (cudaEventElapsedTime)
//   host_ms    steady_clock time to enqueue the step, without synchronising
//   wall_ms    steady_clock time of the step including cudaEventSynchronize on its end
// and the report gives median, p10, p90 and min of each; img/s = batch / median
// device time. Peak device memory is the caching allocator's peak over warm-up and
// timed steps (reset after the model, optimizer and inputs exist), as PyTorch's
// torch.cuda.max_memory_allocated after reset_peak_memory_stats.
//
// Backend settings are strata's defaults unless flags change them: TF32 off,
// deterministic cuDNN algorithms chosen by heuristics (cudnnGet*_v7, the first
// deterministic algorithm within the 1 GiB workspace cap), no cudnnFind. --tf32,
// --nondeterministic and --cudnn-find change them; --variant labels such a run.
// Diagnostics: the cuda backend's NHWC -> NCHW layout fallbacks per step, and with
// --trace one extra step of the tape modes under the op trace (ops/trace.h: host
// time spent inside the backend, per op).
//
// --backend reference|null runs the same code on the CPU (host timing only) for
// smoke tests on machines without a GPU; use small configurations there.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "backends/api/registry.h"
#include "backends/cuda/cuda_backend.h"
#include "core/allocator.h"
#include "nn/nn.h"
#include "ops/trace.h"

using namespace strata;
using json = nlohmann::json;

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// --- configurations ----------------------------------------------------------

struct BenchConfig {
  std::string name;
  bool train = false;
  int64_t batch = 1;
  int64_t resolution = 224;
  bool nhwc = false;
  bool bf16 = false;
};

const std::vector<std::string> kDefaultConfigs = {"infer_b1_224",   "infer_b256_224",      "train_b128_32",
                                                  "train_b128_224", "train_b128_224_nhwc", "train_b256_224_nhwc_bf16"};

BenchConfig parse_config(const std::string& s) {
  static const std::regex re(R"((infer|train)_b(\d+)_(\d+)((?:_nhwc|_bf16)*))");
  std::smatch m;
  STRATA_CHECK(std::regex_match(s, m, re), "resnet50_gpu: configuration '", s,
               "' is not <infer|train>_b<batch>_<resolution>[_nhwc][_bf16]");
  BenchConfig c;
  c.name = s;
  c.train = m[1] == "train";
  c.batch = std::stoll(m[2]);
  c.resolution = std::stoll(m[3]);
  c.nhwc = m[4].str().find("_nhwc") != std::string::npos;
  c.bf16 = m[4].str().find("_bf16") != std::string::npos;
  STRATA_CHECK(c.batch > 0 && c.resolution >= 32, "resnet50_gpu: configuration '", s,
               "' needs batch >= 1 and resolution >= 32");
  return c;
}

// --- statistics ---------------------------------------------------------------

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

json summary(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  return {{"median", quantile(v, 0.5)},
          {"p10", quantile(v, 0.1)},
          {"p90", quantile(v, 0.9)},
          {"min", *std::min_element(v.begin(), v.end())}};
}

// --- timing --------------------------------------------------------------------

// One step's device time by CUDA events on `stream` (cuda), or host time after a
// synchronize (CPU backends), plus enqueue and wall time by steady_clock.
class StepTimer {
 public:
  using Clock = std::chrono::steady_clock;
  StepTimer(bool cuda, void* stream, backends::Backend& be) : cuda_(cuda), be_(be) {
    if (cuda_) {
      stream_ = static_cast<cudaStream_t>(stream);
      cuda_check(cudaEventCreate(&start_), "cudaEventCreate");
      cuda_check(cudaEventCreate(&end_), "cudaEventCreate");
    }
  }
  ~StepTimer() {
    if (cuda_) {
      cudaEventDestroy(start_);
      cudaEventDestroy(end_);
    }
  }
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  void begin() {
    t0_ = Clock::now();
    if (cuda_) cuda_check(cudaEventRecord(start_, stream_), "cudaEventRecord(start)");
  }
  void enqueued() {
    t1_ = Clock::now();
    if (cuda_) cuda_check(cudaEventRecord(end_, stream_), "cudaEventRecord(end)");
  }
  // Waits for the step; returns {device_ms, host_ms, wall_ms}.
  std::array<double, 3> finish() {
    float device = 0;
    if (cuda_) {
      cuda_check(cudaEventSynchronize(end_), "cudaEventSynchronize");
      cuda_check(cudaEventElapsedTime(&device, start_, end_), "cudaEventElapsedTime");
    } else {
      be_.synchronize();
    }
    const auto t2 = Clock::now();
    auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    const double wall = ms(t2 - t0_);
    return {cuda_ ? static_cast<double>(device) : wall, ms(t1_ - t0_), wall};
  }

 private:
  bool cuda_;
  backends::Backend& be_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  Clock::time_point t0_, t1_;
};

// --- one measurement -----------------------------------------------------------

// The op trace of one step (tape modes): host time inside the backend per op,
// summed by op name, largest first.
json summarize_trace(const std::vector<ops::TraceEvent>& events) {
  std::map<std::string_view, std::pair<int64_t, double>> by;
  double total = 0;
  for (const auto& e : events) {
    auto& [n, us] = by[op_name(e.op)];
    ++n;
    us += e.host_us;
    total += e.host_us;
  }
  std::vector<std::pair<std::string_view, std::pair<int64_t, double>>> v(by.begin(), by.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  json ops = json::array();
  for (const auto& [name, cu] : v)
    ops.push_back({{"op", std::string(name)}, {"count", cu.first}, {"total_us", cu.second},
                   {"mean_us", cu.second / static_cast<double>(cu.first)}});
  return {{"ops", events.size()}, {"backend_host_us", total}, {"by_op", ops}};
}

struct Options {
  std::string backend = "cuda";
  int iters = 30;
  int warmup = 5;
  double max_seconds = 30;
  uint64_t seed = 1;
  double lr = 0.01;
  bool trace = false;  // one extra traced step in the tape modes
};

constexpr int kMinIters = 20;
constexpr int64_t kClasses = 1000;

// Random N(0,1)-ish values (uniform in [-1.7, 1.7), variance ~1), never zeros in bulk.
Tensor random_images(const BenchConfig& c, MemoryFormat fmt, uint64_t seed) {
  Tensor host = Tensor::empty(Shape{c.batch, 3, c.resolution, c.resolution}, DType::f32, Device::cpu(), fmt);
  std::mt19937_64 gen(seed);
  float* p = host.data<float>();
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(static_cast<double>(gen() >> 11) * 0x1.0p-53 * 3.4 - 1.7);
  return host;
}

Tensor random_labels(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int64_t>(gen() % kClasses);
  Tensor t = Tensor::empty(Shape{n}, DType::i64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

json measure(const Options& o, const BenchConfig& c, ops::DispatchMode mode) {
  json r = {{"config", c.name},
            {"mode", std::string(ops::dispatch_mode_name(mode))},
            {"kind", c.train ? "training" : "inference"},
            {"batch", c.batch},
            {"resolution", c.resolution},
            {"dtype", c.bf16 ? "bf16-mixed" : "f32"},
            {"layout", c.nhwc ? "NHWC" : "NCHW"}};
  if (c.bf16) {
    r["status"] = "not_supported";
    r["note"] =
        "not supported yet: strata's nn has no mixed-precision (autocast) path, and the cuda backend's batch_norm, "
        "loss and optimizer ops are f32-only";
    return r;
  }
  backends::Backend& be = backends::registry().get(o.backend);
  const bool cuda = be.device_type() == DeviceType::cuda;
  try {
    if (cuda) {
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      backends::cuda::empty_cache();
    }
    nn::ResNetConfig rc;
    rc.depth = 50;
    rc.num_classes = kClasses;
    nn::ModelOptions mo;
    mo.memory_format = c.nhwc ? MemoryFormat::channels_last : MemoryFormat::contiguous;
    auto t_build = std::chrono::steady_clock::now();
    auto model = nn::make_resnet(rc, mode, o.backend, mo);
    r["describe"] = model->describe();
    const Shape in_sizes{c.batch, 3, c.resolution, c.resolution};
    Tensor x = model->input_buffer(in_sizes);
    copy_into(random_images(c, mo.memory_format, o.seed), x);
    Tensor labels = Tensor::empty(Shape{c.batch}, DType::i64, model->device());
    copy_into(random_labels(c.batch, o.seed + 1), labels);
    std::unique_ptr<nn::Optimizer> opt;
    if (c.train) {
      model->train();
      nn::OptimizerConfig oc;
      oc.kind = nn::OptimizerKind::sgd;
      oc.lr = o.lr;
      oc.momentum = 0.9;
      opt = model->make_optimizer(oc);
      r["optimizer"] = nn::describe(oc);
    } else {
      model->eval();
    }
    be.synchronize();
    const size_t fallbacks_before = cuda ? backends::cuda::layout_fallbacks() : 0;
    r["setup_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();

    Allocator& alloc = allocator_for(model->device());
    alloc.reset_peak();
    double check = NAN;
    // One step; `read` takes the check value (loss, or the logits' sum) after timing.
    auto step = [&](bool read) {
      if (c.train) {
        nn::StepResult s = model->train_step(x, labels, *opt);
        return read ? std::function<double()>([s] { return s.loss.item(); }) : std::function<double()>();
      }
      Tensor y = model->predict(x);
      return read ? std::function<double()>([y] {
        double sum = 0;
        for (float v : y.to_vector<float>()) sum += v;
        return sum;
      })
                  : std::function<double()>();
    };

    for (int i = 0; i < o.warmup; ++i) step(false);
    be.synchronize();

    StepTimer timer(cuda, cuda ? backends::registry().impl<backends::CudaBackend>().stream() : nullptr, be);
    std::vector<double> dev, host, wall;
    const auto t_start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) {
      const bool last_allowed = i + 1 >= kMinIters &&
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count() >
                                    o.max_seconds;
      const bool last = i + 1 == o.iters || last_allowed;
      timer.begin();
      auto read = step(last);
      timer.enqueued();
      auto [d, h, w] = timer.finish();
      dev.push_back(d);
      host.push_back(h);
      wall.push_back(w);
      if (last) {
        check = read();
        break;
      }
    }
    const AllocatorStats st = alloc.stats();
    const double med = quantile(dev, 0.5);
    if (cuda)  // conv/batch-norm calls that cuDNN refused in NHWC and ran through NCHW copies
      r["layout_fallbacks_per_step"] =
          static_cast<double>(backends::cuda::layout_fallbacks() - fallbacks_before) /
          static_cast<double>(o.warmup + static_cast<int>(dev.size()));
    if (o.trace && mode != ops::DispatchMode::direct) {
      be.synchronize();
      ops::take_trace();
      ops::set_trace_enabled(true);
      const auto t0 = std::chrono::steady_clock::now();
      step(false);
      const double enqueue_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      ops::set_trace_enabled(false);
      be.synchronize();
      r["trace"] = summarize_trace(ops::take_trace());
      r["trace"]["step_enqueue_us"] = enqueue_us;
    }
    r["status"] = "ok";
    r["iters"] = dev.size();
    r["warmup"] = o.warmup;
    r["device_ms"] = summary(dev);
    r["host_ms"] = summary(host);
    r["wall_ms"] = summary(wall);
    r["img_per_s"] = static_cast<double>(c.batch) * 1000.0 / med;
    r["peak_bytes"] = st.peak_bytes;
    r["reserved_bytes"] = st.reserved_bytes;
    r["check"] = check;
    r["check_what"] = c.train ? "loss of the last timed step" : "sum of the last logits";
  } catch (const std::exception& e) {
    r["status"] = "error";
    r["note"] = e.what();
    if (cuda) (void)cudaGetLastError();
  }
  return r;
}

std::string fmt_ms(const json& s) {
  if (s.is_null()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", s["median"].get<double>());
  return b;
}

json device_info(bool cuda) {
  json d;
  if (!cuda) return {{"name", "cpu"}};
  cudaDeviceProp p{};
  int rt = 0, drv = 0;
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
    d["name"] = p.name;
    d["sm_count"] = p.multiProcessorCount;
    d["memory_bytes"] = p.totalGlobalMem;
    d["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  }
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  d["cuda_runtime"] = rt;
  d["cuda_driver"] = drv;
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ResNet-50 on the GPU in each dispatch mode (PyTorch's side: bench/peers/pytorch_resnet50.py)"};
  Options o;
  std::string mode_opt = "all", json_path;
  std::vector<std::string> config_names{"all"};
  bool tf32 = false, find_algos = false, nondeterministic = false, list = false;
  app.add_option("--mode", mode_opt, "virtual | static | direct | all")
      ->check(CLI::IsMember({"virtual", "static", "direct", "all"}));
  app.add_option("--config", config_names, "configurations (or 'all'): <infer|train>_b<N>_<res>[_nhwc][_bf16]")
      ->delimiter(',');
  app.add_option("--iters", o.iters, "timed steps per measurement (at least 20)")->check(CLI::Range(kMinIters, 100000));
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::Range(0, 100000));
  app.add_option("--max-seconds", o.max_seconds, "stop a measurement's timed steps after this long (>= 20 steps)");
  app.add_option("--json", json_path, "write the results here (rewritten after each measurement)");
  app.add_option("--backend", o.backend, "cuda (default); reference or null for CPU smoke tests");
  app.add_option("--seed", o.seed, "seed of the random inputs and labels");
  app.add_flag("--tf32", tf32, "allow TF32 for f32 conv/linear (strata's default: off)");
  app.add_flag("--cudnn-find", find_algos, "choose cuDNN algorithms by cudnnFind*Ex timing (default: heuristics)");
  app.add_flag("--nondeterministic", nondeterministic, "allow non-deterministic cuDNN algorithms (default: not)");
  app.add_flag("--trace", o.trace, "after timing, trace one step of the tape modes (host time per backend op)");
  std::string variant = "default";
  app.add_option("--variant", variant, "a label for this run's settings, written to the JSON");
  app.add_flag("--list", list, "print the default configurations and exit");
  CLI11_PARSE(app, argc, argv);

  if (list) {
    for (const auto& n : kDefaultConfigs) std::cout << n << "\n";
    return 0;
  }
  try {
    std::vector<BenchConfig> configs;
    for (const auto& n : config_names) {
      if (n == "all")
        for (const auto& d : kDefaultConfigs) configs.push_back(parse_config(d));
      else
        configs.push_back(parse_config(n));
    }
    std::vector<ops::DispatchMode> modes;
    if (mode_opt == "all")
      modes = {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call, ops::DispatchMode::direct};
    else
      modes = {ops::parse_dispatch_mode(mode_opt)};

    backends::Backend& be = backends::registry().get(o.backend);  // throws listing the built ones
    const bool cuda = be.device_type() == DeviceType::cuda;
    json settings = {{"backend", o.backend}};
    if (cuda) {
      auto& cb = backends::registry().impl<backends::CudaBackend>();
      cb.set_allow_tf32(tf32);
      cb.set_benchmark(find_algos);
      cb.set_deterministic(!nondeterministic);
      const auto& s = cb.settings();
      settings["allow_tf32"] = s.allow_tf32;
      settings["deterministic"] = s.deterministic;
      settings["cudnn_find"] = s.benchmark;
      settings["persistent_batch_norm"] = s.persistent_batch_norm;
      settings["max_workspace_bytes"] = s.max_workspace_bytes;
      settings["algorithm_selection"] =
          std::string(s.benchmark ? "cudnnFind*Ex timing" : "cudnnGet*Algorithm_v7 heuristics") +
          (s.deterministic ? ", deterministic algorithms only" : "") + ", workspace cap " +
          std::to_string(s.max_workspace_bytes >> 20) + " MiB";
    }
    json out = {{"framework", "strata"},
                {"variant", variant},
                {"device", device_info(cuda)},
                {"settings", settings},
                {"iters", o.iters},
                {"warmup", o.warmup},
                {"min_iters", kMinIters},
                {"max_seconds", o.max_seconds},
                {"results", json::array()}};
    auto write = [&] {
      if (json_path.empty()) return;
      std::ofstream f(json_path);
      f << out.dump(1) << "\n";
    };
    std::printf("resnet50_gpu on %s | %s\n", out["device"].value("name", "?").c_str(), settings.dump().c_str());
    std::printf("%-26s %-8s %-9s %11s %11s %11s %10s %10s %s\n", "config", "mode", "status", "device_ms",
                "host_ms", "wall_ms", "img/s", "peak_MiB", "check");
    // Configurations outside, modes inside: the modes of one configuration run back
    // to back, so drift between them stays small.
    for (const auto& c : configs) {
      for (auto m : modes) {
        json r = measure(o, c, m);
        out["results"].push_back(r);
        write();
        const bool ok = r["status"] == "ok";
        std::printf("%-26s %-8s %-9s %11s %11s %11s %10.1f %10.1f %.9g%s%s\n", c.name.c_str(),
                    r["mode"].get<std::string>().c_str(), r["status"].get<std::string>().c_str(),
                    ok ? fmt_ms(r["device_ms"]).c_str() : "-", ok ? fmt_ms(r["host_ms"]).c_str() : "-",
                    ok ? fmt_ms(r["wall_ms"]).c_str() : "-", ok ? r["img_per_s"].get<double>() : 0.0,
                    ok ? static_cast<double>(r["peak_bytes"].get<size_t>()) / (1 << 20) : 0.0,
                    ok ? r["check"].get<double>() : NAN, ok ? "" : "  ", ok ? "" : r.value("note", "").c_str());
        if (ok && r.contains("trace")) {
          const json& t = r["trace"];
          std::printf("    trace: %zu backend calls, %.0f us inside the backend of %.0f us enqueue; top:",
                      t["ops"].get<size_t>(), t["backend_host_us"].get<double>(), t["step_enqueue_us"].get<double>());
          for (size_t i = 0; i < std::min<size_t>(4, t["by_op"].size()); ++i) {
            const json& e = t["by_op"][i];
            std::printf(" %s %lldx%.1fus", e["op"].get<std::string>().c_str(),
                        static_cast<long long>(e["count"].get<int64_t>()), e["mean_us"].get<double>());
          }
          std::printf("\n");
        }
        if (ok && r.value("layout_fallbacks_per_step", 0.0) > 0)
          std::printf("    layout fallbacks (NHWC -> NCHW copies) per step: %.1f\n",
                      r["layout_fallbacks_per_step"].get<double>());
        std::fflush(stdout);
      }
    }
    write();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet50_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
