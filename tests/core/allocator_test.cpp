#include <gtest/gtest.h>

#include "strata/core/allocator.h"
#include "strata/core/tensor.h"

namespace strata {
namespace {

TEST(CpuAllocator, CountsCurrentAndPeakBytes) {
  CpuAllocator& a = cpu_allocator();
  const size_t before = a.stats().current_bytes;
  a.reset_peak();
  {
    Tensor t = Tensor::empty({1000}, DType::f64);
    EXPECT_EQ(a.stats().current_bytes, before + 8000);
    EXPECT_GE(a.stats().peak_bytes, before + 8000);
  }
  EXPECT_EQ(a.stats().current_bytes, before);
  EXPECT_GE(a.stats().peak_bytes, before + 8000);
}

TEST(CpuAllocator, PinnedFallsBackToHostMemory) {
  Allocator& p = pinned_host_allocator();
  void* m = p.allocate(100);
  ASSERT_NE(m, nullptr);
  p.deallocate(m, 100);
}

}  // namespace
}  // namespace strata
