#include "nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <type_traits>
#include <vector>

namespace strata::study {

namespace {

// The few NVML types used, as nvml.h declares them (stable C ABI since CUDA 5).
using Ret = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using Dev = void*;
constexpr Ret kSuccess = 0;
constexpr int kPowerSamples = 0;  // NVML_TOTAL_POWER_SAMPLES (mW)
constexpr int kGpuUtilSamples = 1;  // NVML_GPU_UTILIZATION_SAMPLES (%)
struct MemoryInfo {
  unsigned long long total, free, used;
};
union Value {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
};
struct Sample {
  unsigned long long ts;
  Value v;
};
enum ValueType { kDouble = 0, kUInt = 1, kULong = 2, kULongLong = 3, kSLongLong = 4, kSInt = 5 };

double as_double(const Value& v, int type) {
  switch (type) {
    case kDouble: return v.d;
    case kUInt: return v.ui;
    case kULong: return static_cast<double>(v.ul);
    case kULongLong: return static_cast<double>(v.ull);
    case kSLongLong: return static_cast<double>(v.sll);
    case kSInt: return v.si;
    default: return 0;
  }
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Nvml::Api {
  Ret (*init)() = nullptr;
  const char* (*error_string)(Ret) = nullptr;
  Ret (*by_index)(unsigned, Dev*) = nullptr;
  Ret (*by_pci)(const char*, Dev*) = nullptr;
  Ret (*name)(Dev, char*, unsigned) = nullptr;
  Ret (*driver)(char*, unsigned) = nullptr;
  Ret (*memory)(Dev, MemoryInfo*) = nullptr;
  Ret (*energy)(Dev, unsigned long long*) = nullptr;
  Ret (*samples)(Dev, int, unsigned long long, int*, unsigned*, Sample*) = nullptr;

  // Samples newer than `since`; empty when there are none or the call is unsupported.
  std::vector<Sample> newer(Dev d, int kind, uint64_t since, int* type) const {
    unsigned n = 0;
    // NVML_ERROR_NOT_FOUND (no sample newer than `since`) lands here too.
    if (samples(d, kind, since, type, &n, nullptr) != kSuccess || n == 0) return {};
    std::vector<Sample> out(n + 16);  // more may arrive between the two calls
    n = static_cast<unsigned>(out.size());
    const Ret r = samples(d, kind, since, type, &n, out.data());
    if (r != kSuccess) return {};
    out.resize(n);
    return out;
  }
};

Nvml& Nvml::open(const std::string& pci_bus_id) {
  static Nvml instance(pci_bus_id);  // NVML is process-wide; one device per study run
  return instance;
}

Nvml::Nvml(const std::string& pci_bus_id) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    error_ = std::string("libnvidia-ml.so.1 not loadable: ") + (e ? e : "?");
    return;
  }
  static Api api;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    return fn != nullptr;
  };
  // The _v2 entry points are what nvml.h maps the plain names to since CUDA 5/8.
  const bool have = sym(api.init, "nvmlInit_v2") && sym(api.error_string, "nvmlErrorString") &&
                    sym(api.by_index, "nvmlDeviceGetHandleByIndex_v2") && sym(api.name, "nvmlDeviceGetName") &&
                    sym(api.memory, "nvmlDeviceGetMemoryInfo");
  if (!have) {
    error_ = "libnvidia-ml.so.1 lacks nvmlInit_v2 or a basic device query";
    return;
  }
  sym(api.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  sym(api.driver, "nvmlSystemGetDriverVersion");
  sym(api.energy, "nvmlDeviceGetTotalEnergyConsumption");
  sym(api.samples, "nvmlDeviceGetSamples");
  if (Ret r = api.init(); r != kSuccess) {
    error_ = std::string("nvmlInit_v2: ") + api.error_string(r);
    return;
  }
  Dev d = nullptr;
  if (pci_bus_id.empty() || api.by_pci == nullptr || api.by_pci(pci_bus_id.c_str(), &d) != kSuccess) d = nullptr;
  if (d == nullptr) {
    if (Ret r = api.by_index(0, &d); r != kSuccess) {
      error_ = std::string("nvmlDeviceGetHandleByIndex_v2(0): ") + api.error_string(r);
      return;
    }
  }
  char buf[96] = {};
  if (api.name(d, buf, sizeof buf) == kSuccess) name_ = buf;
  if (api.driver != nullptr && api.driver(buf, sizeof buf) == kSuccess) driver_ = buf;
  api_ = &api;
  dev_ = d;
}

std::optional<uint64_t> Nvml::energy_mj() const {
  unsigned long long e = 0;
  if (!ok() || api_->energy == nullptr || api_->energy(dev_, &e) != kSuccess) return std::nullopt;
  return e;
}

std::optional<uint64_t> Nvml::mem_used_bytes() const {
  MemoryInfo m{};
  if (!ok() || api_->memory(dev_, &m) != kSuccess) return std::nullopt;
  return m.used;
}

std::optional<uint64_t> Nvml::mem_total_bytes() const {
  MemoryInfo m{};
  if (!ok() || api_->memory(dev_, &m) != kSuccess) return std::nullopt;
  return m.total;
}

NvmlWindow Nvml::begin() const {
  NvmlWindow w;
  w.t0 = now_s();
  if (!ok()) return w;
  int type = 0;
  if (api_->samples != nullptr) {
    for (const Sample& s : api_->newer(dev_, kGpuUtilSamples, 0, &type)) w.last_util_ts = std::max<uint64_t>(w.last_util_ts, s.ts);
    for (const Sample& s : api_->newer(dev_, kPowerSamples, 0, &type)) w.last_power_ts = std::max<uint64_t>(w.last_power_ts, s.ts);
  }
  w.energy_mj = energy_mj();  // last, closest to the first timed step
  return w;
}

NvmlReading Nvml::end(const NvmlWindow& w) const {
  NvmlReading r;
  const auto e1 = energy_mj();  // first, closest to the last timed step
  r.window_s = now_s() - w.t0;
  if (!ok()) return r;
  if (e1 && w.energy_mj) r.energy_mj = static_cast<double>(*e1 - *w.energy_mj);
  if (api_->samples != nullptr) {
    int type = kUInt;
    double sum = 0;
    for (const Sample& s : api_->newer(dev_, kGpuUtilSamples, w.last_util_ts, &type)) {
      sum += as_double(s.v, type);
      ++r.util_samples;
    }
    if (r.util_samples > 0) r.gpu_util_pct = sum / r.util_samples;
    sum = 0;
    for (const Sample& s : api_->newer(dev_, kPowerSamples, w.last_power_ts, &type)) {
      sum += as_double(s.v, type);
      ++r.power_samples;
    }
    if (r.power_samples > 0) r.power_w = sum / r.power_samples / 1000.0;  // mW
  }
  r.mem_used_bytes = mem_used_bytes();
  return r;
}

}  // namespace strata::study
