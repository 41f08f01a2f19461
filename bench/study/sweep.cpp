// study_resnet50 sweep: strata's ResNet-50 at each (batch, resolution) point, for
// evaluation and training, in each dispatch mode, one JSON record per measurement. The
// model runs with the fusions on, as strata's defaults (fused training, fused or folded
// evaluation); an impl "<mode>_unfused" runs the same mode with them off, for the
// study's fused/unfused rows.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/core/allocator.h"
#include "driver.h"
#include "strata/nn/nn.h"
#include "resnet50_support.h"

namespace strata::study {

namespace {

json base_record(const std::string& impl, bool train, Point p) {
  return {{"impl", impl},   {"framework", "strata"},        {"kind", train ? "train" : "eval"},
          {"batch", p.batch}, {"resolution", p.resolution}, {"dtype", "f32"},
          {"layout", "NCHW"}};
}

// The suffix of an impl that runs its mode without the fusions.
constexpr std::string_view kUnfused = "_unfused";

// The study's name of a mode: graph mode is the "cudagraph" row, beside PyTorch's replay.
std::string impl_name(ops::DispatchMode mode) {
  return mode == ops::DispatchMode::graph ? "cudagraph" : std::string(ops::dispatch_mode_name(mode));
}

json measure(const Options& o, Point p, bool train, ops::DispatchMode mode, bool fused) {
  json r = base_record("strata_" + impl_name(mode) + std::string(fused ? "" : kUnfused), train, p);
  r["mode"] = std::string(ops::dispatch_mode_name(mode));
  r["fused"] = fused;
  backends::Backend& be = backends::registry().get(o.backend);
  const bool cuda = be.device_type() == DeviceType::cuda;
  try {
    if (cuda) {
      bench::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      backends::cuda::empty_cache();  // each measurement starts from an empty cache, as PyTorch's
    }
    const auto t_build = std::chrono::steady_clock::now();
    auto model = bench::make_resnet50(mode, o.backend, MemoryFormat::contiguous, std::nullopt, fused,
                                      fused ? std::nullopt : std::optional<bool>(false));
    Tensor x = model->input_buffer(Shape{p.batch, 3, p.resolution, p.resolution});
    const Tensor host = bench::random_images(p.batch, p.resolution, MemoryFormat::contiguous, o.seed);
    copy_into(host, x);
    // Copies are timed on their own, with the device idle, and never inside a step.
    r["h2d"] = time_h2d(host, x, be, o.h2d_repeats);
    Tensor labels = model->targets_buffer(Shape{p.batch});  // read in place, as the input buffer
    copy_into(bench::random_labels(p.batch, o.seed + 1), labels);
    std::unique_ptr<nn::Optimizer> opt;
    if (train) {
      model->train();
      opt = model->make_optimizer(bench::sgd_config(o.lr));
    } else {
      model->eval();
    }
    be.synchronize();
    r["setup_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();
    Allocator& alloc = allocator_for(model->device());
    alloc.reset_peak();
    run_timed(o, be, p.batch, bench::make_step(*model, x, labels, opt.get()), r);
    const AllocatorStats st = alloc.stats();
    r["peak_bytes"] = st.peak_bytes;
    r["reserved_bytes"] = st.reserved_bytes;
    r["status"] = "ok";
  } catch (const std::exception& e) {
    r["status"] = is_oom(e.what()) ? "oom" : "error";
    r["note"] = e.what();
    if (cuda) (void)cudaGetLastError();
  }
  return r;
}

void print_record(const json& r) {
  const bool ok = r["status"] == "ok";
  std::printf("%-16s %-5s %5lld x %-5lld %-7s", r["impl"].get<std::string>().c_str(),
              r["kind"].get<std::string>().c_str(), static_cast<long long>(r["batch"].get<int64_t>()),
              static_cast<long long>(r["resolution"].get<int64_t>()), r["status"].get<std::string>().c_str());
  if (ok) {
    const json& nv = r["nvml"];
    std::printf(" %9.3f ms/sample  dev %9.3f  host %9.3f  p99 %9.3f ms  n=%3zu  peak %8.1f MiB  util %s  mJ/sample %s",
                r["ms_per_sample"].get<double>(), r["device_ms"]["median"].get<double>(),
                r["host_ms"]["median"].get<double>(), r["device_ms"]["p99"].get<double>(),
                r["repeats"].get<size_t>(), static_cast<double>(r["peak_bytes"].get<size_t>()) / (1 << 20),
                nv["gpu_util_pct"].is_null() ? "-" : std::to_string(nv["gpu_util_pct"].get<double>()).c_str(),
                r["energy_mj_per_sample"].is_null() ? "-"
                                                    : std::to_string(r["energy_mj_per_sample"].get<double>()).c_str());
  } else {
    std::printf(" %s", r.value("note", "").substr(0, 160).c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int run_sweep(const Options& o, const std::vector<Point>& points_in, const std::vector<std::string>& impls,
              const std::vector<std::string>& kinds) {
  backends::Backend& be = backends::registry().get(o.backend);  // throws listing the built ones
  const bool cuda = be.device_type() == DeviceType::cuda;
  json settings = {{"backend", o.backend}};
  if (cuda) {
    const auto& s = backends::registry().impl<backends::CudaBackend>().settings();
    settings["allow_tf32"] = s.allow_tf32;
    settings["deterministic"] = s.deterministic;
    settings["cudnn_find"] = s.benchmark;
    settings["cudnn_graph"] = s.cudnn_graph;
    settings["max_workspace_bytes"] = s.max_workspace_bytes;
  }
  json device = bench::device_info(cuda);
  open_nvml(device);
  json doc = {{"study", 1},
              {"framework", "strata"},
              {"part", "sweep"},
              {"device", device},
              {"nvml", nvml_info()},
              {"settings", settings},
              {"protocol",
               {{"warmup", o.warmup},
                {"min_repeats", o.repeats.min_repeats},
                {"max_repeats", o.repeats.max_repeats},
                {"min_seconds", o.repeats.min_seconds},
                {"h2d_repeats", o.h2d_repeats},
                {"deadline_s", o.deadline_s},
                {"lr", o.lr},
                {"seed", o.seed}}},
              {"records", json::array()}};
  // Cheapest points first, so that a deadline drops only the largest ones.
  std::vector<Point> points = points_in;
  std::stable_sort(points.begin(), points.end(), [](Point a, Point b) { return a.cost() < b.cost(); });
  std::map<std::string, std::vector<Point>> oom_at;  // impl/kind -> points that ran out of memory
  std::printf("study_resnet50 sweep on %s (%s) | %zu points x %zu kinds x %zu impls\n",
              device.value("name", "?").c_str(), o.backend.c_str(), points.size(), kinds.size(), impls.size());
  for (Point p : points) {
    for (const auto& kind : kinds) {
      const bool train = kind == "train";
      // Modes of one point run back to back, so that drift between them stays small.
      for (const auto& impl : impls) {
        json r;
        const std::string key = impl + "/" + kind;
        auto dominated = std::find_if(oom_at[key].begin(), oom_at[key].end(), [&](Point q) {
          return p.batch >= q.batch && p.resolution >= q.resolution;
        });
        const bool fused = !impl.ends_with(kUnfused);
        const std::string mode_name = fused ? impl : impl.substr(0, impl.size() - kUnfused.size());
        if (mode_name == "cudagraph" && !cuda) {
          r = base_record("strata_" + impl, train, p);
          r["status"] = "absent";
          r["note"] = "graph mode runs on the cuda backend only";
        } else if (since_start_s() > o.deadline_s) {
          r = base_record("strata_" + impl, train, p);
          r["status"] = "skipped";
          r["note"] = "deadline: the part's time budget was spent";
        } else if (dominated != oom_at[key].end()) {
          r = base_record("strata_" + impl, train, p);
          r["status"] = "oom";
          r["note"] = "not run: at least as large as " + std::to_string(dominated->batch) + "x" +
                      std::to_string(dominated->resolution) + ", which ran out of memory";
        } else {
          // "cudagraph": strata's graph mode, beside PyTorch's CUDA-graph replay.
          r = measure(o, p, train,
                      mode_name == "cudagraph" ? ops::DispatchMode::graph : ops::parse_dispatch_mode(mode_name), fused);
          if (r["status"] == "oom") oom_at[key].push_back(p);
        }
        doc["records"].push_back(r);
        write_json(o.json_path, doc);
        print_record(r);
      }
    }
  }
  doc["elapsed_s"] = since_start_s();
  write_json(o.json_path, doc);
  return exit_status(doc["records"], "sweep");
}

}  // namespace strata::study
