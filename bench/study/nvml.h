#pragma once
// NVML (NVIDIA Management Library) read through dlopen("libnvidia-ml.so.1") at run
// time, so nothing here needs nvml.h or links against the driver: on a machine
// without one, Nvml::open() reports why and every reading is absent. Standard
// library only (the LibTorch peer builds this file too). bench/peers/study_nvml.py
// is the same for Python through ctypes; both report the same fields.
//
// A measurement window brackets the timed steps:
//   Nvml& nv = Nvml::open(pci_bus_id);       // once; "" picks NVML device 0
//   NvmlWindow w = nv.begin();                // energy counter, newest sample time
//   ... timed steps ...
//   NvmlReading r = nv.end(w);                // energy used, utilisation samples
// Utilisation comes from the driver's own sample buffer (nvmlDeviceGetSamples, GPU
// utilisation in %, one sample every ~1/6 s on recent cards) instead of a polling
// thread, so reading it does not disturb a host-bound step. Energy is the difference
// of nvmlDeviceGetTotalEnergyConsumption (mJ since the driver loaded).
#include <cstdint>
#include <optional>
#include <string>

namespace strata::study {

struct NvmlWindow {
  std::optional<uint64_t> energy_mj;
  uint64_t last_util_ts = 0;   // newest utilisation sample seen at begin (driver µs)
  uint64_t last_power_ts = 0;  // newest power sample seen at begin
  double t0 = 0;               // steady-clock seconds
};

struct NvmlReading {
  std::optional<double> energy_mj;     // used over the window
  std::optional<double> gpu_util_pct;  // mean of the samples in the window
  int util_samples = 0;
  std::optional<double> power_w;  // mean of the power samples in the window
  int power_samples = 0;
  std::optional<uint64_t> mem_used_bytes;  // device-wide, at the end of the window
  double window_s = 0;
};

class Nvml {
 public:
  // The process-wide instance for the device with this PCI bus id ("0000:1b:00.0",
  // as cudaDeviceGetPCIBusId writes it); "" or an unknown id uses NVML index 0.
  static Nvml& open(const std::string& pci_bus_id = "");
  bool ok() const { return dev_ != nullptr; }
  const std::string& error() const { return error_; }  // why not ok()
  const std::string& name() const { return name_; }
  const std::string& driver_version() const { return driver_; }
  std::optional<uint64_t> energy_mj() const;
  std::optional<uint64_t> mem_used_bytes() const;
  std::optional<uint64_t> mem_total_bytes() const;

  NvmlWindow begin() const;
  NvmlReading end(const NvmlWindow& w) const;

  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

 private:
  explicit Nvml(const std::string& pci_bus_id);
  struct Api;
  const Api* api_ = nullptr;
  void* dev_ = nullptr;
  std::string error_, name_, driver_;
};

}  // namespace strata::study
