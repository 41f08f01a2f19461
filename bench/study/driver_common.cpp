#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "driver.h"
#include "nvml.h"
#include "resnet50_support.h"

namespace strata::study {

namespace {
const auto g_start = std::chrono::steady_clock::now();
Nvml* g_nvml = nullptr;
}  // namespace

double since_start_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count(); }

const char* seed_points() { return "8x64,32x32,32x64,32x128,32x256,128x32,256x64,512x32"; }

std::vector<Point> parse_points(const std::string& s) {
  static const std::regex re(R"(\s*(\d+)x(\d+)\s*)");
  std::vector<Point> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::smatch m;
    STRATA_CHECK(std::regex_match(item, m, re), "study: point '", item, "' is not <batch>x<resolution>");
    Point p{std::stoll(m[1]), std::stoll(m[2])};
    // The ImageNet stem and four stride-2 stages still leave a 1x1 map at 8 px.
    STRATA_CHECK(p.batch >= 1 && p.resolution >= 8, "study: point '", item, "' needs batch >= 1, resolution >= 8");
    out.push_back(p);
  }
  STRATA_CHECK(!out.empty(), "study: no points in '", s, "'");
  return out;
}

bool is_oom(const std::string& what) {
  return what.find("out of memory") != std::string::npos || what.find("cudaErrorMemoryAllocation") != std::string::npos;
}

int exit_status(const json& records, const char* driver) {
  const auto failed = std::count_if(records.begin(), records.end(),
                                    [](const json& r) { return r.value("status", "") == "error"; });
  if (failed == 0) return 0;
  std::fprintf(stderr, "study_resnet50 %s: %lld of %zu records failed (status \"error\")\n", driver,
               static_cast<long long>(failed), records.size());
  return 1;
}

Tensor pinned_like(const Tensor& host) {
  Tensor t = Tensor::empty_pinned(host.sizes(), host.dtype(), Tensor::format_like(host, host.sizes()));
  copy_into(host, t);
  return t;
}

json to_json(const Summary& s) {
  if (s.n == 0) return nullptr;
  return {{"n", s.n},     {"median", s.median}, {"p10", s.p10}, {"p90", s.p90},
          {"p99", s.p99}, {"min", s.min},       {"max", s.max}, {"mean", s.mean}};
}

json time_h2d(const Tensor& host, const Tensor& dst, backends::Backend& be, int repeats) {
  const bool cuda = be.device_type() == DeviceType::cuda;
  void* stream = cuda ? backends::registry().impl<backends::CudaBackend>().stream() : nullptr;
  Tensor pinned = pinned_like(host);
  auto time_copies = [&](const Tensor& src) {
    std::vector<double> ms;
    bench::StepTimer timer(cuda, stream, be);
    be.synchronize();
    for (int i = 0; i < repeats; ++i) {
      timer.begin();
      copy_into(src, dst);
      timer.enqueued();
      ms.push_back(timer.finish()[2]);  // until the data is usable: what a loader waits for
    }
    return quantile(ms, 0.5);
  };
  return {{"bytes", host.nbytes()},
          {"pageable_ms", time_copies(host)},
          {"pinned_ms", time_copies(pinned)},
          {"repeats", repeats}};
}

void open_nvml(const json& device) { g_nvml = &Nvml::open(device.value("pci_bus_id", std::string())); }

json nvml_info() {
  if (g_nvml == nullptr || !g_nvml->ok()) return {{"ok", false}, {"error", g_nvml ? g_nvml->error() : "not opened"}};
  json j = {{"ok", true}, {"name", g_nvml->name()}, {"driver", g_nvml->driver_version()}};
  if (auto t = g_nvml->mem_total_bytes()) j["mem_total_bytes"] = *t;
  return j;
}

void run_timed(const Options& o, backends::Backend& be, int64_t batch,
               const std::function<std::function<double()>(bool)>& step, json& r) {
  const bool cuda = be.device_type() == DeviceType::cuda;
  // The first step builds cuDNN plans and fills the caches: its time is reported apart.
  const auto t_first = std::chrono::steady_clock::now();
  for (int i = 0; i < o.warmup; ++i) {
    step(false);
    if (i == 0) {
      be.synchronize();
      r["first_step_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_first).count();
    }
  }
  be.synchronize();
  bench::StepTimer timer(cuda, cuda ? backends::registry().impl<backends::CudaBackend>().stream() : nullptr, be);
  std::vector<double> dev, host, wall;
  double check = NAN;
  const NvmlWindow w = g_nvml ? g_nvml->begin() : NvmlWindow{};
  const auto t_start = std::chrono::steady_clock::now();
  for (int n = 0;; ++n) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    // The step about to run is the last when, after it, the policy says stop.
    const bool last = o.repeats.done(n + 1, elapsed);
    timer.begin();
    auto read = step(last);
    timer.enqueued();
    auto [d, h, wl] = timer.finish();
    dev.push_back(d);
    host.push_back(h);
    wall.push_back(wl);
    if (last) {
      check = read();
      break;
    }
  }
  const NvmlReading nv = g_nvml ? g_nvml->end(w) : NvmlReading{};
  const Summary ds = summarize(dev);
  r["repeats"] = dev.size();
  r["warmup"] = o.warmup;
  r["device_ms"] = to_json(ds);
  r["host_ms"] = to_json(summarize(host));
  r["wall_ms"] = to_json(summarize(wall));
  r["ms_per_sample"] = ds.median / static_cast<double>(batch);
  r["img_per_s"] = static_cast<double>(batch) * 1000.0 / ds.median;
  r["check"] = check;
  json j = {{"window_s", nv.window_s}, {"util_samples", nv.util_samples}, {"power_samples", nv.power_samples}};
  auto put = [&](const char* k, const auto& v) { j[k] = v ? json(*v) : json(nullptr); };
  put("gpu_util_pct", nv.gpu_util_pct);
  put("power_w", nv.power_w);
  put("energy_mj", nv.energy_mj);
  put("mem_used_bytes", nv.mem_used_bytes);
  r["nvml"] = j;
  r["energy_mj_per_sample"] =
      nv.energy_mj ? json(*nv.energy_mj / static_cast<double>(dev.size() * static_cast<size_t>(batch))) : json(nullptr);
}

void write_json(const std::string& path, const json& doc) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    f << doc.dump(1) << "\n";
    STRATA_CHECK(f.good(), "study: cannot write ", tmp);
  }
  STRATA_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "study: cannot rename ", tmp, " to ", path);
}

}  // namespace strata::study
