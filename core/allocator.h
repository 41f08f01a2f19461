#pragma once
// Allocators own raw memory for a device. Each keeps current/peak byte counters
// so benchmarks can report memory. Backends register the allocator of their device
// (the cuda backend its caching allocator); the CPU one is always there.
#include <atomic>
#include <cstddef>

#include "strata/core/device.h"

namespace strata {

struct AllocatorStats {
  size_t current_bytes = 0;
  size_t peak_bytes = 0;
  size_t reserved_bytes = 0;  // held from the system, used or cached
  size_t allocations = 0;     // count of allocate() calls
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Throws strata::Error naming the request (and what is in use) when out of memory.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
};

// 64-byte aligned host memory (one cache line, one AVX-512 vector).
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;

 private:
  std::atomic<size_t> current_{0}, peak_{0}, count_{0};
};

CpuAllocator& cpu_allocator();

// The allocator for a device. CUDA devices get one only when the cuda backend is
// built and has registered it; otherwise this throws, naming the device.
Allocator& allocator_for(Device d);
void register_device_allocator(DeviceType t, Allocator* a);

// Page-locked host memory for host-to-device copies. Plain CPU memory until a
// GPU backend installs its pinned allocator.
Allocator& pinned_host_allocator();
void set_pinned_host_allocator(Allocator* a);

}  // namespace strata
