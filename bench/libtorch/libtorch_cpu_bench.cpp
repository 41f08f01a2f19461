// libtorch_cpu_bench: strata's CPU backends (onednn, openblas, eigen) side by side with
// LibTorch (Debian's libtorch-dev 1.13, CPU) and with the raw libraries, in one process,
// so that every ratio compares numbers taken under the same load:
//   resnet50_infer_b1_224   ResNet-50 inference (eval, no grad), batch 1 at 224x224
//   resnet50_infer_b8_224   the same, batch 8 at 224x224
//   resnet50_infer_b8_32    the same, batch 8 at 32x32
//   resnet50_train_b8_32    a training step (zero_grad, forward, cross-entropy,
//                           backward, SGD momentum 0.9), batch 8 at 32x32
//   resnet50_train_b4_224   the same, batch 4 at 224x224
//   conv3x3_fwd             one 3x3 conv, pad 1, N=8, C=K=64, 56x56, forward
//   conv3x3_train           the same, forward + backward data + backward weight
//   *_bf16                  the same in bf16 where the CPU has it: ResNet-50 with bf16
//                           compute and f32 parameters, batch norm and loss (strata:
//                           ModelOptions::compute_dtype, onednn, tape modes; LibTorch:
//                           CPU autocast to bf16), the conv with bf16 tensors
//   relu64                  relu on 64 floats: the per-call cost (strata's onednn
//                           backend runs it on its own loop, not on oneDNN)
//   relu65536               relu on 65536 floats, which the onednn backend hands to
//                           oneDNN: the plan cache's cost over the raw execute
//   lenet_infer_b1_28       LeNet-5 inference at batch 1 on one 1x1x28x28 image, Gu, Gozum & Lam's
//   lenet_keras_infer_b1_28 measurement, in nn/lenet.h's two variants (the paper's TensorFlow and
//                           Keras models); both sides hold the same weights (cases.h), and every
//                           case's logits must match the first case's (the run fails otherwise).
//                           bench/lenet_latency.cpp times strata's modes alone, with the GPU's
//   add64                   a + b on two [8, 8] f32 tensors written as a user writes it:
//                           strata's tensor API (operator+ on the default dispatcher,
//                           the tensor's device's best backend) beside LibTorch's a + b,
//                           without and with a tape (b requires grad)
// ResNet-50 is torchvision's v1.5 (ImageNet stem, 1000 classes) on both sides, f32
// NCHW. Cases take turns (`rounds` times, in a new random order each round), so drift
// and other processes' load spread over all of them; before each turn the process waits
// until no thread of it runs (OpenBLAS's workers spin on after a call, and a case timed
// while the previous case's pool still spins shares the cores with it); each case
// reports the median of at least 20 samples and their p10-p90 spread, in wall time and in
// the process's CPU time (steadier on a loaded machine).
//
// Threads come from the environment, set before the process starts: OMP_NUM_THREADS
// (oneDNN and LibTorch's OpenMP pools) and OPENBLAS_NUM_THREADS (OpenBLAS's own
// pool); LibTorch's intra-op count is then set to OMP_NUM_THREADS with
// torch::set_num_threads (it otherwise picks its own default). bench/libtorch/run.sh
// runs 1 and 2 threads, OMP_WAIT_POLICY left to libgomp's default unless WAIT_POLICY says
// otherwise (why: run.sh).
//
//   OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
//     libtorch_cpu_bench --json out.json [--workloads relu64,conv3x3_fwd] [--rounds 8]
#include <omp.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/libtorch/cases.h"
#include "strata/core/exit_status.h"
#include "strata/core/version.h"

using json = nlohmann::json;
using namespace strata_bench;  // NOLINT: bench-local

namespace {

constexpr double kConvFlops = 2.0 * kConvN * kConvK * kConvHW * kConvHW * kConvC * 9;

std::vector<Workload> all_workloads() {
  std::vector<Workload> w;
  w.push_back({"resnet50_infer_b1_224", Kind::resnet_infer, 1, 224, 0, 0, 2, 5, 2, 1, 0});
  w.push_back({"resnet50_infer_b8_32", Kind::resnet_infer, 8, 32, 0, 0, 2, 5, 3, 1, 0});
  w.push_back({"resnet50_train_b8_32", Kind::resnet_train, 8, 32, 0, 0, 2, 5, 2, 1, 0});
  // Seconds per step on a 2-core machine: one warm-up, one sample per turn.
  w.push_back({"resnet50_infer_b8_224", Kind::resnet_infer, 8, 224, 0, 0, 1, 7, 1, 1, 0});
  w.push_back({"resnet50_train_b4_224", Kind::resnet_train, 4, 224, 0, 0, 1, 7, 1, 1, 0});
  w.push_back({"resnet50_infer_b1_224_bf16", Kind::resnet_infer, 1, 224, 0, 0, 2, 5, 2, 1, 0, true});
  w.push_back({"resnet50_train_b8_32_bf16", Kind::resnet_train, 8, 32, 0, 0, 2, 5, 2, 1, 0, true});
  w.push_back({"conv3x3_fwd", Kind::conv_fwd, 0, 0, 0, kConvFlops, 2, 5, 3, 1, 1});
  w.push_back({"conv3x3_train", Kind::conv_train, 0, 0, 0, 3 * kConvFlops, 2, 5, 2, 1, 1});
  w.push_back({"conv3x3_fwd_bf16", Kind::conv_fwd, 0, 0, 0, kConvFlops, 2, 5, 3, 1, 1, true});
  w.push_back({"conv3x3_train_bf16", Kind::conv_train, 0, 0, 0, 3 * kConvFlops, 2, 5, 2, 1, 1, true});
  w.push_back({"relu64", Kind::relu, 0, 0, 64, 0, 200, 5, 3, 2000, 200});
  w.push_back({"relu65536", Kind::relu, 0, 0, 65536, 0, 50, 5, 3, 200, 20});
  w.push_back({"add64", Kind::tensor_add, 0, 0, 64, 0, 200, 5, 3, 2000, 200});
  w.push_back({"lenet_infer_b1_28", Kind::lenet_infer, 1, 28, 0, 0, 20, 5, 4, 20, 5});
  w.push_back({"lenet_keras_infer_b1_28", Kind::lenet_infer, 1, 28, 0, 0, 100, 5, 4, 200, 50, false, true});
  return w;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

struct Timed {
  Case c;
  std::vector<double> samples_s;  // wall seconds per call
  std::vector<double> cpu_s;      // CPU seconds of the whole process per call
};

// CPU time of every thread of the process: on a loaded machine it leaves out the time
// the threads waited for a core (idle OpenMP threads sleep under OMP_WAIT_POLICY=passive;
// OpenBLAS's spin on sched_yield and count).
double process_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Waits until the process's threads are parked: 20 ms slices of sleep until one costs
// the process under 1 ms of CPU time. Returns the seconds waited, or a negative number
// when some thread still ran after 3 s (the turn is then timed anyway, and counted).
double park_threads() {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  for (;;) {
    const double c0 = process_cpu_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    if (process_cpu_s() - c0 < 1e-3) return waited;
    if (waited > 3.0) return -waited;
  }
}

struct Turns {
  double max_park_s = 0;  // the longest wait for parked threads before a turn
  int unparked = 0;       // turns that started with a thread still running
};

// The cases take turns, in a new (seeded) random order each round; each turn waits for
// parked threads, runs warm_calls_per_turn untimed calls, then samples_per_round
// samples of calls_per_sample calls each. At least 20 samples per case.
std::vector<Timed> run(const Workload& w, std::vector<Case> cases, int rounds, Turns& turns) {
  using Clock = std::chrono::steady_clock;
  constexpr int kMinSamples = 20;
  rounds = std::max(rounds, (kMinSamples + w.samples_per_round - 1) / w.samples_per_round);
  std::vector<Timed> t;
  for (auto& c : cases) {
    for (int i = 0; i < w.warmup; ++i) c.step();
    t.push_back({std::move(c), {}, {}});
  }
  std::mt19937 rng(12345);
  std::vector<size_t> order(t.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (int r = 0; r < rounds; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t k : order) {
      Timed& tc = t[k];
      const double parked = park_threads();
      turns.max_park_s = std::max(turns.max_park_s, std::abs(parked));
      if (parked < 0) ++turns.unparked;
      for (int i = 0; i < w.warm_calls_per_turn; ++i) tc.c.step();
      for (int s = 0; s < w.samples_per_round; ++s) {
        const double c0 = process_cpu_s();
        const auto t0 = Clock::now();
        for (int i = 0; i < w.calls_per_sample; ++i) tc.c.step();
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        tc.samples_s.push_back(dt / w.calls_per_sample);
        tc.cpu_s.push_back((process_cpu_s() - c0) / w.calls_per_sample);
      }
    }
  }
  return t;
}

std::string label(const Case& c) {
  std::string s = c.impl;
  if (!c.backend.empty()) s += " " + c.backend;
  return s + " " + c.mode;
}

// Cases that report their output (cases.h: Case::output) against the first of them: the largest
// |difference| must stay within 1e-4 of the first case's largest |value| (at least 1). Prints and
// returns {"max_abs_diff", "tolerance", "ok"} per case; `failed` counts those beyond.
json check_outputs(const std::vector<Timed>& t, int& failed) {
  json checks = json::array();
  std::vector<float> first;
  std::string first_label;
  for (const auto& tc : t) {
    if (!tc.c.output) continue;
    const std::vector<float> y = tc.c.output();
    if (first.empty()) {
      first = y;
      first_label = label(tc.c);
    }
    double diff = y.size() == first.size() ? 0 : INFINITY, scale = 1;
    for (size_t i = 0; i < first.size() && i < y.size(); ++i) {
      const double e = std::abs(static_cast<double>(y[i]) - first[i]);
      if (!(e <= diff)) diff = e;  // a NaN stays, and fails the check
      scale = std::max(scale, std::abs(static_cast<double>(first[i])));
    }
    const bool ok = diff <= 1e-4 * scale;
    if (!ok) {
      ++failed;
      std::printf("  CHECK FAILED: %s differs from %s by %.3g\n", label(tc.c).c_str(), first_label.c_str(), diff);
    }
    checks.push_back({{"impl", tc.c.impl}, {"backend", tc.c.backend}, {"mode", tc.c.mode}, {"against", first_label},
                      {"max_abs_diff", diff}, {"tolerance", 1e-4 * scale}, {"ok", ok}});
  }
  if (!checks.empty()) std::printf("  outputs checked against %s: %d differ\n", first_label.c_str(), failed);
  return checks;
}

// Prints the workload's table and returns its JSON.
json report(const Workload& w, const std::vector<Timed>& t, bool trace) {
  const bool tiny = w.kind == Kind::relu;
  const double unit = tiny ? 1e6 : 1e3;
  const char* u = tiny ? "us" : "ms";
  double torch_med = NAN, raw_med = NAN;
  for (const auto& tc : t) {
    const double m = quantile(tc.samples_s, 0.5);
    // strata against LibTorch's fastest no_grad form (or its only case).
    if (tc.c.impl == "libtorch" && (std::isnan(torch_med) || (tc.c.mode.starts_with("no_grad") && m < torch_med)))
      torch_med = m;
    if (tc.c.impl == "raw" && tc.c.backend == "onednn" && tiny) raw_med = m;
  }
  std::printf("\n## %s (%zu samples per case; median, p10-p90)\n", w.name.c_str(),
              t.empty() ? 0 : t[0].samples_s.size());
  json rows = json::array();
  for (const auto& tc : t) {
    const double med = quantile(tc.samples_s, 0.5), p10 = quantile(tc.samples_s, 0.1),
                 p90 = quantile(tc.samples_s, 0.9);
    // Tiny ops with the tape compare with LibTorch with autograd, the rest without.
    double ref = torch_med;
    if (tiny && tc.c.mode.find("grad") != std::string::npos && tc.c.mode != "no_grad")
      for (const auto& o : t)
        if (o.c.impl == "libtorch" && o.c.mode == "grad") ref = quantile(o.samples_s, 0.5);
    json r = {{"impl", tc.c.impl},
              {"backend", tc.c.backend},
              {"mode", tc.c.mode},
              {"median_s", med},
              {"p10_s", p10},
              {"p90_s", p90},
              {"cpu_median_s", quantile(tc.cpu_s, 0.5)},
              {"samples", tc.samples_s.size()}};
    std::string extra;
    char b[96];
    if (w.flops > 0) {
      r["gflops"] = w.flops / med * 1e-9;
      std::snprintf(b, sizeof b, "  %7.1f GFLOP/s", w.flops / med * 1e-9);
      extra += b;
    }
    if (tc.c.impl == "strata" && !std::isnan(ref)) {
      r["vs_libtorch"] = med / ref;
      std::snprintf(b, sizeof b, "  strata/libtorch %.2f", med / ref);
      extra += b;
    }
    if (tc.c.impl == "strata" && tc.c.backend == "onednn" && !std::isnan(raw_med)) {
      r["minus_raw_onednn_us"] = (med - raw_med) * 1e6;
      std::snprintf(b, sizeof b, "  strata-raw %+.3f us", (med - raw_med) * 1e6);
      extra += b;
    }
    std::printf("  %-38s %10.4f %s  (%.4f-%.4f)  cpu %.4f%s\n", label(tc.c).c_str(), med * unit, u, p10 * unit,
                p90 * unit, quantile(tc.cpu_s, 0.5) * unit, extra.c_str());
    if (trace && tc.c.trace) {
      r["trace"] = tc.c.trace();
      std::printf("      trace: %s\n", r["trace"].get<std::string>().c_str());
    }
    rows.push_back(r);
  }
  std::fflush(stdout);
  return {{"workload", w.name}, {"rows", rows}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata's CPU backends side by side with LibTorch and the raw libraries"};
  std::vector<std::string> names, backends{"onednn", "openblas", "eigen"}, modes{"virtual", "static", "direct"};
  std::string json_path;
  int rounds = 0;
  bool list = false, no_torch = false, trace = false;
  app.add_option("--workloads", names, "workloads to run (default: all; --list names them)")->delimiter(',');
  app.add_option("--backends", backends, "strata backends")->delimiter(',');
  app.add_option("--modes", modes, "strata dispatch modes; \"<mode>/unfused\": a ResNet without its batch norms "
                 "fused with the ReLU and add after them (nn::ResNetConfig::fuse_eval, fuse_train); "
                 "\"<mode>/folded\": with the batch norms folded into the convolutions for inference "
                 "(nn::ResNetConfig::fold_batch_norm); \"<mode>/folded_nhwc\": the same on a channels-last "
                 "model; \"<mode>/folded_nhwc_direct\": that without Winograd (nn::ResNetConfig::winograd); "
                 "\"<mode>/folded_nhwc_s2d\": with the stem over 2x2 pixel blocks "
                 "(nn::ResNetConfig::space_to_depth_stem); \"<mode>/folded_nhwc_copy\": each residual copied "
                 "into a new output, not accumulated in place (nn::ResNetConfig::residual_in_place)")->delimiter(',');
  app.add_option("--rounds", rounds, "turns of each case (default: the workload's)");
  app.add_option("--json", json_path, "write every median and the environment here");
  app.add_flag("--no-libtorch", no_torch, "skip LibTorch (strata and the raw libraries only)");
  std::string torchscript;
  app.add_option("--torchscript", torchscript,
                 "folder of bench/libtorch/export_torchscript.py's files: ResNet-50 inference also as LibTorch "
                 "deploys it (TorchScript, frozen, optimize_for_inference)");
  app.add_flag("--list", list, "print the workloads and exit");
  app.add_flag("--trace", trace, "after timing, one step of strata's tape modes under the op trace");
  app.set_version_flag("--version", strata::version_line("libtorch_cpu_bench"));
  STRATA_CLI11_PARSE(app, argc, argv);

  std::vector<Workload> chosen;
  for (const auto& w : all_workloads()) {
    if (list) std::printf("%s\n", w.name.c_str());
    if (names.empty() || std::find(names.begin(), names.end(), w.name) != names.end()) chosen.push_back(w);
  }
  if (list) return 0;
  if (chosen.size() != (names.empty() ? all_workloads().size() : names.size())) {
    std::fprintf(stderr, "libtorch_cpu_bench: unknown workload in --workloads (see --list)\n");
    return strata::kExitUsage;
  }

  // One thread count for all three: OMP_NUM_THREADS as oneDNN sees it.
  const int threads = omp_get_max_threads();
  libtorch_set_threads(threads);
  if (!torchscript.empty()) libtorch_use_torchscript(torchscript);
  json env = {{"OMP_NUM_THREADS", env_or("OMP_NUM_THREADS", "(unset)")},
              {"OPENBLAS_NUM_THREADS", env_or("OPENBLAS_NUM_THREADS", "(unset)")},
              {"OMP_WAIT_POLICY", env_or("OMP_WAIT_POLICY", "(unset: libgomp default, spin then sleep)")},
              {"GLIBC_TUNABLES", env_or("GLIBC_TUNABLES", "(unset)")},
              {"omp_get_max_threads", threads},
              {"openblas_get_num_threads", openblas_threads()},
              {"torch_get_num_threads", libtorch_threads()},
              {"hardware_concurrency", std::thread::hardware_concurrency()},
              {"libtorch", libtorch_describe()},
              {"loadavg_start", loadavg()}};
  json lines = json::array();
  for (const auto& l : strata_describe()) lines.push_back(l);
  for (const auto& l : raw_describe()) lines.push_back(l);
  env["describe"] = lines;
  std::printf(
      "# libtorch_cpu_bench | threads: omp %d, openblas %d, torch %d | OMP_WAIT_POLICY=%s | GLIBC_TUNABLES=%s"
      " | load %s\n",
      threads, openblas_threads(), libtorch_threads(), env["OMP_WAIT_POLICY"].get<std::string>().c_str(),
      env["GLIBC_TUNABLES"].get<std::string>().c_str(), env["loadavg_start"].get<std::string>().c_str());
  std::printf("# %s\n", env["libtorch"].get<std::string>().c_str());
  for (const auto& l : lines) std::printf("# %s\n", l.get<std::string>().c_str());
  if (openblas_threads() > 0 && openblas_threads() != threads)
    std::printf("# warning: OpenBLAS runs %d threads, OpenMP %d: set OPENBLAS_NUM_THREADS too\n", openblas_threads(),
                threads);

  json out = {{"environment", env}, {"workloads", json::array()}};
  int failed_checks = 0;
  try {
    for (const auto& w : chosen) {
      std::vector<Case> cases;
      if (!no_torch)
        for (auto& c : libtorch_cases(w)) cases.push_back(std::move(c));
      for (auto& c : strata_cases(w, backends, modes)) cases.push_back(std::move(c));
      for (auto& c : raw_cases(w)) cases.push_back(std::move(c));
      Turns turns;
      const std::vector<Timed> timed = run(w, std::move(cases), rounds > 0 ? rounds : w.rounds, turns);
      json r = report(w, timed, trace);
      int differ = 0;
      r["output_checks"] = check_outputs(timed, differ);
      failed_checks += differ;
      r["loadavg_end"] = loadavg();
      r["max_park_s"] = turns.max_park_s;
      r["unparked_turns"] = turns.unparked;
      if (turns.unparked > 0)
        std::printf("  warning: %d turns started with a thread of this process still running after 3 s\n",
                    turns.unparked);
      out["workloads"].push_back(r);
      if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libtorch_cpu_bench: %s\n", e.what());
    return 1;
  }
  std::printf("\n# load at the end: %s\n", loadavg().c_str());
  if (failed_checks > 0) {
    std::fprintf(stderr, "libtorch_cpu_bench: %d case(s) computed another output than the first case\n", failed_checks);
    return 1;
  }
  return 0;
}
