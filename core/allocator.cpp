#include "strata/core/allocator.h"

#include <cstdlib>
#include <new>

#include "strata/core/error.h"

namespace strata {

void* CpuAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + 63) / 64 * 64;
  STRATA_CHECK(rounded >= bytes, "cpu allocator: request of ", bytes, " bytes overflows");
  void* p = std::aligned_alloc(64, rounded);
  STRATA_CHECK(p != nullptr, "cpu allocator: out of memory allocating ", bytes, " bytes (",
               current_.load(), " bytes in use by strata)");
  const size_t now = current_.fetch_add(bytes) + bytes;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void CpuAllocator::deallocate(void* p, size_t bytes) {
  if (!p) return;
  std::free(p);
  current_.fetch_sub(bytes);
}

AllocatorStats CpuAllocator::stats() const {
  AllocatorStats s;
  s.current_bytes = current_.load();
  s.peak_bytes = peak_.load();
  s.reserved_bytes = s.current_bytes;
  s.allocations = count_.load();
  return s;
}

void CpuAllocator::reset_peak() { peak_.store(current_.load()); }

CpuAllocator& cpu_allocator() {
  static CpuAllocator a;
  return a;
}

namespace {
Allocator* g_cuda_allocator = nullptr;
Allocator* g_pinned_allocator = nullptr;
}  // namespace

void register_device_allocator(DeviceType t, Allocator* a) {
  STRATA_CHECK(t == DeviceType::cuda, "register_device_allocator: only cuda allocators can be registered");
  g_cuda_allocator = a;
}

Allocator& allocator_for(Device d) {
  if (d.is_cpu()) return cpu_allocator();
  STRATA_CHECK(g_cuda_allocator != nullptr, "allocator_for: no allocator for device ", d.str(),
               " (strata was built without the cuda backend, or it found no GPU)");
  return *g_cuda_allocator;
}

Allocator& pinned_host_allocator() { return g_pinned_allocator ? *g_pinned_allocator : cpu_allocator(); }
void set_pinned_host_allocator(Allocator* a) { g_pinned_allocator = a; }

}  // namespace strata
