#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "strata/core/allocator.h"
#include "strata/core/device.h"

namespace strata {

// A block of device memory. Owned blocks go back to their allocator on destruction;
// borrowed blocks (allocator == nullptr) wrap memory the caller keeps alive.
class Storage {
 public:
  Storage(size_t bytes, Device d, Allocator& a) : bytes_(bytes), device_(d), alloc_(&a) {
    data_ = a.allocate(bytes);
  }
  Storage(void* borrowed, size_t bytes, Device d) : data_(borrowed), bytes_(bytes), device_(d) {}
  ~Storage() {
    if (alloc_) alloc_->deallocate(data_, bytes_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // Counts the in-place writes reported through Tensor::note_write (PyTorch's version
  // counter): a layer that keeps copies derived from a tensor compares it to know that
  // they are stale.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  Allocator* alloc_ = nullptr;
  std::atomic<uint64_t> version_{0};
};

}  // namespace strata
