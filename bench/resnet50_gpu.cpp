// resnet50_gpu: ResNet-50 (torchvision v1.5, 1000 classes, ImageNet stem) on the cuda
// backend, in each dispatch mode, timed as bench/peers/pytorch_resnet50.py times
// PyTorch eager, so that bench/peers/compare.py can print strata / PyTorch per
// configuration and mode (tools/gpu/bench.sh runs all three in one device call).
//
//   resnet50_gpu --mode all --config all --iters 30 --warmup 5 --json strata.json [--rounds 3]
//
// Configurations are named <kind>_b<batch>_<resolution>[_nhwc][_bf16]:
//   infer_b1_224, infer_b256_224         inference (eval, no tape), f32 NCHW
//   train_b128_32, train_b128_224        training step, f32 NCHW
//   train_b128_224_nhwc                  training step, f32 channels-last
//   train_b256_224_nhwc_bf16             bf16 mixed precision, channels-last (PyTorch's
//                                        autocast; strata: nn::ModelOptions::compute_dtype,
//                                        in every dispatch mode).
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

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/core/allocator.h"
#include "strata/core/exit_status.h"
#include "strata/core/version.h"
#include "strata/nn/nn.h"
#include "strata/ops/trace.h"
#include "resnet50_support.h"
#include "study/stats.h"

using namespace strata;
using json = nlohmann::json;
using study::quantile;

namespace {

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

json summary(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  return {{"median", quantile(v, 0.5)},
          {"p10", quantile(v, 0.1)},
          {"p90", quantile(v, 0.9)},
          {"min", *std::min_element(v.begin(), v.end())}};
}

// --- one measurement -----------------------------------------------------------

struct Options {
  std::string backend = "cuda";
  int iters = 30;
  int warmup = 5;
  double max_seconds = 30;
  uint64_t seed = 1;
  double lr = 0.01;
  bool fuse = true;    // nn::ResNetConfig::fuse_eval and fuse_train
  std::optional<bool> fold;  // nn::ResNetConfig::fold_batch_norm (unset: its default)
  std::optional<bool> s2d_stem, winograd;  // nn::ResNetConfig::space_to_depth_stem, winograd
  bool trace = false;  // one extra traced step in the tape modes
  bool trace_sync = false;  // and one with every op waited for (per-op device time)
  bool auto_layout = false;  // configurations without _nhwc: the backend's preferred layout, not NCHW
  bool nchw_input = false;   // the input a plain NCHW tensor the model converts, not its own buffer
};

constexpr int kMinIters = 20;

json measure(const Options& o, const BenchConfig& c, ops::DispatchMode mode) {
  json r = {{"config", c.name},
            {"mode", std::string(ops::dispatch_mode_name(mode))},
            {"kind", c.train ? "training" : "inference"},
            {"batch", c.batch},
            {"resolution", c.resolution},
            {"dtype", c.bf16 ? "bf16-mixed" : "f32"},
            {"layout", c.nhwc ? "NHWC" : o.auto_layout ? "auto" : "NCHW"}};
  backends::Backend& be = backends::registry().get(o.backend);
  const bool cuda = be.device_type() == DeviceType::cuda;
  try {
    if (cuda) {
      bench::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      backends::cuda::empty_cache();
    }
    const std::optional<MemoryFormat> fmt = c.nhwc         ? std::optional(MemoryFormat::channels_last)
                                            : o.auto_layout ? std::nullopt
                                                            : std::optional(MemoryFormat::contiguous);
    auto t_build = std::chrono::steady_clock::now();
    auto model =
        bench::make_resnet50(mode, o.backend, fmt, c.bf16 ? std::optional<DType>(DType::bf16) : std::nullopt, o.fuse,
                             o.fold, o.s2d_stem, o.winograd);
    r["describe"] = model->describe();
    const Shape in_sizes{c.batch, 3, c.resolution, c.resolution};
    Tensor x = model->input_buffer(in_sizes);
    r["model_layout"] = x.is_channels_last() && !x.is_contiguous() ? "NHWC" : "NCHW";
    if (o.nchw_input) x = Tensor::empty(in_sizes, DType::f32, model->device());
    r["input"] = o.nchw_input ? "a user's NCHW f32 tensor, converted by the model each step" : "the model's buffer";
    copy_into(bench::random_images(c.batch, c.resolution, c.nhwc ? MemoryFormat::channels_last
                                                                  : MemoryFormat::contiguous, o.seed), x);
    Tensor labels = model->targets_buffer(Shape{c.batch});  // read in place, as the input buffer
    copy_into(bench::random_labels(c.batch, o.seed + 1), labels);
    std::unique_ptr<nn::Optimizer> opt;
    if (c.train) {
      model->train();
      const nn::OptimizerConfig oc = bench::sgd_config(o.lr);
      opt = model->make_optimizer(oc);
      r["optimizer"] = nn::describe(oc);
    } else {
      model->eval();
    }
    be.synchronize();
    const size_t fallbacks_before = cuda ? backends::cuda::layout_fallbacks() : 0;
    const size_t staging_before = cuda ? backends::cuda::staging_copies() : 0;
    const auto conv_api_before = cuda ? backends::cuda::conv_api_counts() : backends::cuda::ConvApiCounts{};
    r["setup_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();

    Allocator& alloc = allocator_for(model->device());
    alloc.reset_peak();
    double check = NAN;
    const bench::Step step = bench::make_step(*model, x, labels, opt.get());

    for (int i = 0; i < o.warmup; ++i) step(false);
    be.synchronize();

    bench::StepTimer timer(cuda, cuda ? backends::registry().impl<backends::CudaBackend>().stream() : nullptr, be);
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
    if (cuda)  // arguments copied to a temporary in another layout/dtype before a call
      r["staging_copies_per_step"] =
          static_cast<double>(backends::cuda::staging_copies() - staging_before) /
          static_cast<double>(o.warmup + static_cast<int>(dev.size()));
    if (cuda) {  // which cuDNN convolution API ran (graph plans, or the legacy calls)
      const auto now = backends::cuda::conv_api_counts();
      const double steps = static_cast<double>(o.warmup + static_cast<int>(dev.size()));
      r["graph_convs_per_step"] = static_cast<double>(now.graph - conv_api_before.graph) / steps;
      r["legacy_convs_per_step"] = static_cast<double>(now.legacy - conv_api_before.legacy) / steps;
      // With --fold: epilogues run inside cuDNN's graph, and those run by strata's kernel.
      r["fused_epilogues_per_step"] = static_cast<double>(now.fused - conv_api_before.fused) / steps;
      r["epilogue_kernels_per_step"] =
          static_cast<double>(now.epilogue_kernels - conv_api_before.epilogue_kernels) / steps;
      const backends::cuda::KeptBuffers kept = backends::cuda::kept_buffers();  // in peak_bytes
      r["cudnn_workspace_bytes"] = kept.workspace;
      r["scratch_bytes"] = kept.scratch;
    }
    // One extra step under the op trace; with `sync` every op is waited for (its own
    // device time plus host time, serialised). Returns the summary and the enqueue time.
    auto traced_step = [&](bool sync) {
      be.synchronize();
      ops::take_trace();
      ops::set_trace_sync(sync);
      ops::set_trace_enabled(true);
      const auto t0 = std::chrono::steady_clock::now();
      step(false);
      const double enqueue_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      ops::set_trace_enabled(false);
      ops::set_trace_sync(false);
      be.synchronize();
      json t = bench::summarize_trace(ops::take_trace());
      t["step_enqueue_us"] = enqueue_us;
      return t;
    };
    if (o.trace && mode != ops::DispatchMode::direct && mode != ops::DispatchMode::graph) r["trace"] = traced_step(false);
    if (o.trace_sync && mode != ops::DispatchMode::direct && mode != ops::DispatchMode::graph) r["trace_sync"] = traced_step(true);
    r["status"] = "ok";
    r["iters"] = dev.size();
    r["warmup"] = o.warmup;
    r["device_ms"] = summary(dev);
    r["host_ms"] = summary(host);
    r["wall_ms"] = summary(wall);
    r["img_per_s"] = static_cast<double>(c.batch) * 1000.0 / med;
    r["peak_bytes"] = st.peak_bytes;
    r["reserved_bytes"] = st.reserved_bytes;
    if (const ops::direct::StepMemoryStats& sm = model->step_memory(); sm.buffers > 0)  // direct mode's plan
      r["step_memory"] = {{"buffers", sm.buffers},
                          {"arena_bytes", sm.arena_bytes},
                          {"sum_bytes", sm.sum_bytes},
                          {"lower_bound_bytes", sm.lower_bound}};
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

}  // namespace

// Per configuration and mode over the rounds: the median of the rounds' median device times
// and their range.
void print_rounds(const json& results) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> by;
  for (const json& r : results)
    if (r["status"] == "ok")
      by[{r["config"].get<std::string>(), r["mode"].get<std::string>()}].push_back(r["device_ms"]["median"].get<double>());
  std::printf("over the rounds (median device ms per step of each round):\n");
  for (auto& [key, v] : by) {
    std::sort(v.begin(), v.end());
    std::printf("  %-26s %-8s median %.4f, range %.4f-%.4f over %zu rounds\n", key.first.c_str(), key.second.c_str(),
                quantile(v, 0.5), v.front(), v.back(), v.size());
  }
}

int main(int argc, char** argv) {
  CLI::App app{"ResNet-50 on the GPU in each dispatch mode (PyTorch's side: bench/peers/pytorch_resnet50.py)"};
  Options o;
  std::string mode_opt = "all", json_path;
  std::vector<std::string> config_names{"all"};
  bool tf32 = false, find_algos = false, nondeterministic = false, list = false, legacy_conv = false;
  bool strata_bn = false, cudnn_bn = false;
  app.add_option("--mode", mode_opt, "virtual | static | direct | graph | all (graph: cuda only)")
      ->check(CLI::IsMember({"virtual", "static", "direct", "graph", "all"}));
  app.add_option("--config", config_names, "configurations (or 'all'): <infer|train>_b<N>_<res>[_nhwc][_bf16]")
      ->delimiter(',');
  app.add_option("--iters", o.iters, "timed steps per measurement (at least 20)")->check(CLI::Range(kMinIters, 100000));
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::Range(0, 100000));
  app.add_option("--max-seconds", o.max_seconds, "stop a measurement's timed steps after this long (>= 20 steps)");
  int rounds = 1;
  app.add_option("--rounds", rounds, "measure every configuration and mode this many times, the modes' order "
                                     "reversed every other round; the summary gives each one's median and range")
      ->check(CLI::Range(1, 100));
  app.add_option("--json", json_path, "write the results here (rewritten after each measurement)");
  app.add_option("--backend", o.backend, "cuda (default); reference or null for CPU smoke tests");
  app.add_option("--seed", o.seed, "seed of the random inputs and labels");
  app.add_flag("--tf32", tf32, "allow TF32 for f32 conv/linear (strata's default: off)");
  app.add_flag("--auto-layout", o.auto_layout,
               "configurations without _nhwc: the layout the backend prefers (nn::ModelOptions::memory_format "
               "unset) instead of NCHW");
  app.add_flag("--nchw-input", o.nchw_input,
               "time predict/train_step on a plain NCHW f32 tensor the model converts, not on its input buffer");
  app.add_flag("--cudnn-find", find_algos, "choose cuDNN engines by timing them once per shape (default: heuristics)");
  bool no_fuse = false;
  app.add_flag("--no-fuse", no_fuse,
               "batch norm, ReLU and residual add as separate ops, forward and backward, and no folding unless "
               "--fold (default: fused into one batch norm call, nn::ResNetConfig::fuse_eval and fuse_train)");
  bool fold = false, no_fold = false;
  app.add_flag("--fold", fold,
               "inference: batch norms folded into the convolutions, each block's convolutions with the bias, "
               "residual add and ReLU in their own call (nn::ResNetConfig::fold_batch_norm; default: on for cuda, "
               "off for a CPU backend)");
  app.add_flag("--no-fold", no_fold, "inference: batch norms not folded (fused evaluation, or the separate ops "
                                     "with --no-fuse)")
      ->excludes("--fold");
  bool s2d = false, no_s2d = false, wino = false, no_wino = false;
  app.add_flag("--s2d-stem", s2d, "the stem's convolution over 2x2 pixel blocks, in training and inference "
                                  "(nn::ResNetConfig::space_to_depth_stem; default: on for cuda, off for a CPU backend)");
  app.add_flag("--no-s2d-stem", no_s2d, "the stem's 7x7 stride-2 convolution as it is")->excludes("--s2d-stem");
  app.add_flag("--winograd", wino, "with folding: 3x3 stride-1 convolutions may run a Winograd transform "
                                   "(nn::ResNetConfig::winograd; default: on for onednn)");
  app.add_flag("--no-winograd", no_wino, "with folding: no Winograd transform")->excludes("--winograd");
  bool no_fused_epilogue = false;
  app.add_flag("--no-cudnn-epilogue", no_fused_epilogue,
               "with --fold: the convolution's epilogue as strata's kernel after cuDNN's convolution (default: "
               "inside the cuDNN graph where an engine runs it)");
  app.add_flag("--strata-batch-norm", strata_bn, "every batch norm on strata's kernels (default: cuDNN for f32 NCHW)");
  app.add_flag("--cudnn-batch-norm", cudnn_bn, "f32 channels-last batch norm on cuDNN (default: strata's kernels)");
  app.add_flag("--nondeterministic", nondeterministic, "allow non-deterministic cuDNN algorithms (default: not)");
  app.add_flag("--cudnn-legacy", legacy_conv,
               "convolutions through the legacy cudnnConvolution* calls (default: cached graph-API plans)");
  app.add_flag("--trace-sync", o.trace_sync,
               "after timing, one step of the tape modes with every op waited for (device time per op)");
  app.add_flag("--trace", o.trace, "after timing, trace one step of the tape modes (host time per backend op)");
  std::string variant = "default";
  app.add_option("--variant", variant, "a label for this run's settings, written to the JSON");
  app.add_flag("--list", list, "print the default configurations and exit");
  app.set_version_flag("--version", version_line("resnet50_gpu"));
  STRATA_CLI11_PARSE(app, argc, argv);

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
      modes = {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call, ops::DispatchMode::direct,
               ops::DispatchMode::graph};
    else
      modes = {ops::parse_dispatch_mode(mode_opt)};

    backends::Backend& be = backends::registry().get(o.backend);  // throws listing the built ones
    const bool cuda = be.device_type() == DeviceType::cuda;
    o.fuse = !no_fuse;
    if (fold || no_fold)
      o.fold = fold;
    else if (no_fuse)
      o.fold = false;  // --no-fuse: the separate ops
    if (s2d || no_s2d) o.s2d_stem = s2d;
    if (wino || no_wino) o.winograd = wino;
    json settings = {{"backend", o.backend}, {"fuse", o.fuse},
                     {"fold_batch_norm", o.fold ? json(*o.fold) : json("default (on for cuda)")},
                     {"space_to_depth_stem", o.s2d_stem ? json(*o.s2d_stem) : json("default (on for cuda)")},
                     {"winograd", o.winograd ? json(*o.winograd) : json("default (on for onednn)")}};
    if (cuda) {
      auto& cb = backends::registry().impl<backends::CudaBackend>();
      cb.set_allow_tf32(tf32);
      cb.set_benchmark(find_algos);
      cb.set_deterministic(!nondeterministic);
      cb.set_cudnn_graph(!legacy_conv);
      cb.set_cudnn_fused_epilogue(!no_fused_epilogue);
      cb.set_own_nchw_batch_norm(strata_bn);
      cb.set_cudnn_nhwc_batch_norm(cudnn_bn);
      const auto& s = cb.settings();
      settings["batch_norm"] = strata_bn  ? "strata's kernels everywhere"
                               : cudnn_bn ? "cuDNN for f32 (NCHW and NHWC), strata's for f16/bf16"
                                          : "cuDNN for f32 NCHW, strata's kernels otherwise";
      settings["allow_tf32"] = s.allow_tf32;
      settings["deterministic"] = s.deterministic;
      settings["cudnn_find"] = s.benchmark;
      settings["persistent_batch_norm"] = s.persistent_batch_norm;
      settings["max_workspace_bytes"] = s.max_workspace_bytes;
      settings["cudnn_graph"] = s.cudnn_graph;
      settings["cudnn_fused_epilogue"] = s.cudnn_fused_epilogue;
      const char* selection = s.cudnn_graph ? (s.benchmark ? "graph API, fastest of up to 8 heuristic engines (timed)"
                                                           : "graph API, first engine of heuristics mode A")
                                            : (s.benchmark ? "legacy API, cudnnFind*Ex timing"
                                                           : "legacy API, cudnnGet*Algorithm_v7 heuristics");
      settings["algorithm_selection"] =
          std::string(selection) + ", cached plans" +
          (s.deterministic ? ", deterministic algorithms only" : "") + ", workspace cap " +
          std::to_string(s.max_workspace_bytes >> 20) + " MiB";
    }
    json out = {{"framework", "strata"},
                {"variant", variant},
                {"device", bench::device_info(cuda)},
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
    // to back, so drift between them stays small. With --rounds R, all of it R times, the
    // modes' order reversed every other round: the first mode measured in a process pays
    // warm-ups (library handles, allocator blocks, clocks) the others do not.
    int failed = 0;
    for (int round = 0; round < rounds; ++round)
    for (const auto& c : configs) {
      for (size_t mi = 0; mi < modes.size(); ++mi) {
        const ops::DispatchMode m = modes[round % 2 == 0 ? mi : modes.size() - 1 - mi];
        // "all": graph mode where it runs (a GPU: nn/model.h says why).
        if (mode_opt == "all" && m == ops::DispatchMode::graph && !cuda) continue;
        json r = measure(o, c, m);
        r["round"] = round;
        out["results"].push_back(r);
        write();
        const bool ok = r["status"] == "ok";
        if (!ok) ++failed;
        std::printf("%-26s %-8s %-9s %11s %11s %11s %10.1f %10.1f %.9g%s%s\n", c.name.c_str(),
                    r["mode"].get<std::string>().c_str(), r["status"].get<std::string>().c_str(),
                    ok ? fmt_ms(r["device_ms"]).c_str() : "-", ok ? fmt_ms(r["host_ms"]).c_str() : "-",
                    ok ? fmt_ms(r["wall_ms"]).c_str() : "-", ok ? r["img_per_s"].get<double>() : 0.0,
                    ok ? static_cast<double>(r["peak_bytes"].get<size_t>()) / (1 << 20) : 0.0,
                    ok ? r["check"].get<double>() : NAN, ok ? "" : "  ", ok ? "" : r.value("note", "").c_str());
        auto print_top = [](const json& t, size_t n) {  // the trace's n costliest ops
          for (size_t i = 0; i < std::min(n, t["by_op"].size()); ++i) {
            const json& e = t["by_op"][i];
            std::printf(" %s %lldx%.1fus", e["op"].get<std::string>().c_str(),
                        static_cast<long long>(e["count"].get<int64_t>()), e["mean_us"].get<double>());
          }
          std::printf("\n");
        };
        if (ok && r.contains("step_memory")) {
          const json& sm = r["step_memory"];
          auto mib = [&](const char* k) { return static_cast<double>(sm[k].get<int64_t>()) / (1 << 20); };
          std::printf("  planned step: %lld buffers in a %.1f MiB arena (%.1f MiB each apart, %.1f MiB alive at most)\n",
                      static_cast<long long>(sm["buffers"].get<int64_t>()), mib("arena_bytes"), mib("sum_bytes"),
                      mib("lower_bound_bytes"));
        }
        if (ok && r.contains("trace")) {
          const json& t = r["trace"];
          std::printf("    trace: %zu backend calls, %.0f us inside the backend of %.0f us enqueue; top:",
                      t["ops"].get<size_t>(), t["backend_host_us"].get<double>(), t["step_enqueue_us"].get<double>());
          print_top(t, 4);
        }
        if (ok && r.contains("trace_sync")) {
          const json& t = r["trace_sync"];
          std::printf("    per-op device+host time, serialised: %.0f us in %zu ops; top:", t["backend_host_us"].get<double>(),
                      t["ops"].get<size_t>());
          print_top(t, 10);
        }
        if (ok && r.value("staging_copies_per_step", 0.0) > 0)
          std::printf("    staging copies (arguments copied to another layout/dtype) per step: %.1f\n",
                      r["staging_copies_per_step"].get<double>());
        if (ok && r.value("layout_fallbacks_per_step", 0.0) > 0)
          std::printf("    layout fallbacks (NHWC -> NCHW copies) per step: %.1f\n",
                      r["layout_fallbacks_per_step"].get<double>());
        std::fflush(stdout);
      }
    }
    write();
    if (rounds > 1) print_rounds(out["results"]);
    // A failed configuration is a failed run: scripts and CI see it in the exit status, not only
    // in the table (the other configurations still ran and were written).
    if (failed > 0) {
      std::fprintf(stderr, "resnet50_gpu: %d of %zu measurements failed (status \"error\" above)\n", failed,
                   configs.size() * modes.size() * static_cast<size_t>(rounds));
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet50_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
