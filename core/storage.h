#pragma once
#include <cstddef>
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

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  Allocator* alloc_ = nullptr;
};

}  // namespace strata
