#pragma once
// The device caching allocator and the pinned host allocator. Internal to
// backends/cuda; the public face is core/allocator.h plus cuda_backend.h's
// allocator_stats()/empty_cache().
//
// Requests are rounded up to a bin (multiples of 512 bytes up to 4 KiB, then eight
// bins per power of two: at most 12.5% slack). A freed block goes onto the free list
// of its (stream, bin) and is handed out again for the next request of that bin on
// that stream without touching the driver. Reuse on the same stream is safe without
// events: work queued later on the stream runs after the work that used the block.
// When the driver refuses a cudaMalloc, every cached block is released and the
// allocation retried once; if it still fails the error names the request, the
// bytes strata holds (in use and reserved) and what the driver reports free.
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "strata/core/allocator.h"

namespace strata::backends::cuda {

size_t bin_size(size_t bytes);

// The figures stats() reports, kept by both allocators under their own lock.
struct ByteCounts {
  AllocatorStats s;
  void allocated(size_t bytes) {
    s.current_bytes += bytes;
    if (s.current_bytes > s.peak_bytes) s.peak_bytes = s.current_bytes;
    ++s.allocations;
  }
  void freed(size_t bytes) { s.current_bytes -= bytes; }
  void reset_peak() { s.peak_bytes = s.current_bytes; }
};

class CachingAllocator final : public Allocator {
 public:
  CachingAllocator(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  // Returns every cached block to the driver (after the device has finished with them).
  void empty_cache();

  // A CUDA graph's private pool (PyTorch keeps one per graph for the same reason): a
  // graph replays the pointers it was captured with, so every block allocated or freed
  // while it is captured stays out of the free lists until the graph is gone.
  // begin_pool() opens a pool for the capture that starts; end_pool_capture() closes
  // it to new blocks; release_pool() hands its blocks back once the graph is destroyed.
  size_t begin_pool();
  void end_pool_capture();
  void release_pool(size_t pool);

 private:
  struct Block {
    size_t bin;
    size_t requested;
    cudaStream_t stream;
    size_t pool = 0;  // the private pool it was allocated in, 0 for none
  };
  void release_cached_locked();
  void to_free_list_locked(void* p, const Block& b);

  int device_;
  cudaStream_t stream_;
  mutable std::mutex m_;
  std::unordered_map<void*, Block> live_;
  // stream -> bin -> cached block pointers
  std::unordered_map<cudaStream_t, std::unordered_map<size_t, std::vector<void*>>> free_;
  ByteCounts n_;
  size_t cached_ = 0;
  size_t capturing_pool_ = 0, next_pool_ = 1;
  // pool -> blocks freed while the pool's graph may still replay them
  std::unordered_map<size_t, std::vector<std::pair<void*, Block>>> pools_;
};

// Page-locked host memory (cudaHostAlloc), cached by the same bins: cudaFreeHost
// synchronises the device, so blocks are kept for reuse instead. Copies from pinned
// memory finish before copy_into returns, so a reused block is never still in flight.
class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;

 private:
  mutable std::mutex m_;
  std::unordered_map<void*, std::pair<size_t, size_t>> live_;  // ptr -> (bin, requested)
  std::unordered_map<size_t, std::vector<void*>> free_;
  ByteCounts n_;
};

}  // namespace strata::backends::cuda
