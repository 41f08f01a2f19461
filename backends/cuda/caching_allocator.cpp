#include "strata/backends/cuda/caching_allocator.h"

#include <bit>
#include <cstdio>
#include <limits>
#include <string>

#include "strata/backends/cuda/cuda_check.h"

namespace strata::backends::cuda {

namespace {

std::string human_bytes(size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

}  // namespace

size_t bin_size(size_t bytes) {
  if (bytes == 0) return 0;
  if (bytes <= 4096) return round_up(bytes, 512);
  const size_t step = std::bit_floor(bytes) / 8;
  return round_up(bytes, step);
}

void* CachingAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  STRATA_CHECK(bytes <= std::numeric_limits<size_t>::max() / 2, "cuda allocator: request of ", bytes,
               " bytes is larger than any device");
  const size_t bin = bin_size(bytes);
  std::lock_guard<std::mutex> lock(m_);
  void* p = nullptr;
  auto& bins = free_[stream_];
  auto it = bins.find(bin);
  if (it != bins.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    cached_ -= bin;
  } else {
    cudaError_t e = cudaMalloc(&p, bin);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the (non-sticky) error before retrying
      release_cached_locked();
      e = cudaMalloc(&p, bin);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      const bool info = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
      (void)cudaGetLastError();
      STRATA_FAIL("cuda allocator: out of memory allocating ", bytes, " bytes (", human_bytes(bytes), ", bin ",
                  bin, ") on cuda:", device_, ": strata has ", n_.s.current_bytes, " bytes (", human_bytes(n_.s.current_bytes),
                  ") in use and ", n_.s.reserved_bytes, " bytes (", human_bytes(n_.s.reserved_bytes), ") reserved",
                  info ? "; the driver reports " + human_bytes(free_b) + " free of " + human_bytes(total_b)
                       : std::string(),
                  "; cached blocks were released and the allocation retried once (cudaMalloc: ",
                  cudaGetErrorString(e), ")");
    }
    n_.s.reserved_bytes += bin;
  }
  live_.emplace(p, Block{bin, bytes, stream_, capturing_pool_});
  n_.allocated(bytes);
  return p;
}

void CachingAllocator::deallocate(void* p, size_t) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(m_);
  auto it = live_.find(p);
  if (it == live_.end()) return;  // not ours: nothing sensible to do in a destructor path
  const Block b = it->second;
  live_.erase(it);
  n_.freed(b.requested);
  // Freed during a capture, or allocated in a graph's pool: the graph may replay it.
  const size_t pool = capturing_pool_ != 0 ? capturing_pool_ : b.pool;
  if (auto held = pools_.find(pool); held != pools_.end()) {
    held->second.emplace_back(p, b);
    return;
  }
  to_free_list_locked(p, b);
}

void CachingAllocator::to_free_list_locked(void* p, const Block& b) {
  free_[b.stream][b.bin].push_back(p);
  cached_ += b.bin;
}

size_t CachingAllocator::begin_pool() {
  std::lock_guard<std::mutex> lock(m_);
  STRATA_CHECK(capturing_pool_ == 0, "cuda allocator: a graph capture started inside another");
  capturing_pool_ = next_pool_++;
  pools_[capturing_pool_];
  return capturing_pool_;
}

void CachingAllocator::end_pool_capture() {
  std::lock_guard<std::mutex> lock(m_);
  capturing_pool_ = 0;
}

void CachingAllocator::release_pool(size_t pool) {
  std::lock_guard<std::mutex> lock(m_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  for (auto& [p, b] : it->second) to_free_list_locked(p, b);
  pools_.erase(it);
}

void CachingAllocator::release_cached_locked() {
  if (cached_ == 0) return;
  // Blocks on the free lists may still be read by queued kernels: let them finish.
  (void)cudaDeviceSynchronize();
  for (auto& [stream, bins] : free_) {
    for (auto& [bin, ptrs] : bins) {
      for (void* p : ptrs) {
        (void)cudaFree(p);
        n_.s.reserved_bytes -= bin;
      }
      ptrs.clear();
    }
  }
  cached_ = 0;
  (void)cudaGetLastError();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(m_);
  release_cached_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(m_);
  return n_.s;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(m_);
  n_.reset_peak();
}

void* PinnedAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  STRATA_CHECK(bytes <= std::numeric_limits<size_t>::max() / 2, "pinned allocator: request of ", bytes,
               " bytes is too large");
  const size_t bin = bin_size(bytes);
  std::lock_guard<std::mutex> lock(m_);
  void* p = nullptr;
  auto it = free_.find(bin);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    const cudaError_t e = cudaHostAlloc(&p, bin, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      STRATA_FAIL("pinned allocator: cudaHostAlloc of ", bytes, " bytes (", human_bytes(bytes), ") failed: ",
                  cudaGetErrorString(e), "; strata has ", n_.s.current_bytes, " pinned bytes in use and ", n_.s.reserved_bytes,
                  " reserved");
    }
    n_.s.reserved_bytes += bin;
  }
  live_.emplace(p, std::make_pair(bin, bytes));
  n_.allocated(bytes);
  return p;
}

void PinnedAllocator::deallocate(void* p, size_t) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(m_);
  auto it = live_.find(p);
  if (it == live_.end()) return;
  const auto [bin, requested] = it->second;
  live_.erase(it);
  n_.freed(requested);
  free_[bin].push_back(p);
}

AllocatorStats PinnedAllocator::stats() const {
  std::lock_guard<std::mutex> lock(m_);
  return n_.s;
}

void PinnedAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(m_);
  n_.reset_peak();
}

}  // namespace strata::backends::cuda
