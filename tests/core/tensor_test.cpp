#include <gtest/gtest.h>

#include "strata/core/allocator.h"
#include "strata/core/storage.h"
#include "strata/core/tensor.h"
#include "support/expect_error.h"
#include "support/random.h"

namespace strata {
namespace {

TEST(Tensor, EmptyHasContiguousStridesAndAlignedData) {
  Tensor t = Tensor::empty({2, 3, 4, 5});
  EXPECT_EQ(t.strides(), (Shape{60, 20, 5, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.is_channels_last());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u);
  EXPECT_EQ(t.nbytes(), 2u * 3 * 4 * 5 * 4);
  EXPECT_EQ(t.str(), "f32[2,3,4,5] on cpu");
}

TEST(Tensor, SetDataIsSeenByEveryHandleAndKeepsTheGradient) {
  Tensor a = testing::random_tensor({2, 3, 4, 5}, DType::f32, 3);
  const Tensor other_handle = a;
  a.set_grad(Tensor::empty({2, 3, 4, 5}));
  Tensor re = Tensor::empty({2, 3, 4, 5}, DType::f32, Device::cpu(), MemoryFormat::channels_last);
  copy_into(a, re);
  const std::vector<float> values = a.to_vector<float>();
  a.set_data(re);
  EXPECT_TRUE(other_handle.is_channels_last());
  EXPECT_FALSE(other_handle.is_contiguous());
  EXPECT_EQ(other_handle.data_ptr(), re.data_ptr());
  EXPECT_EQ(other_handle.contiguous().to_vector<float>(), values);
  EXPECT_TRUE(other_handle.grad().defined());
  EXPECT_STRATA_ERROR(a.set_data(Tensor::empty({2, 3, 4})), "Tensor::set_data", "f32[2,3,4]", "must agree");
  EXPECT_STRATA_ERROR(a.set_data(Tensor::empty({2, 3, 4, 5}, DType::f64)), "Tensor::set_data", "f64[2,3,4,5]");
}

// The version counts the writes reported to it (copy_into reports its own), per storage:
// a view's write is its base's; a write through data() is not seen until reported.
TEST(Tensor, VersionCountsReportedWritesPerStorage) {
  const Tensor a = testing::random_tensor({4, 6}, DType::f32, 5);
  const Tensor b = Tensor::empty({4, 6});
  const Tensor view = b.narrow(0, 1, 2);
  const uint64_t a0 = a.version(), b0 = b.version();
  copy_into(a, b);
  EXPECT_EQ(b.version(), b0 + 1) << "copy_into reports its destination";
  EXPECT_EQ(a.version(), a0) << "the source is only read";
  copy_into(testing::random_tensor({2, 6}, DType::f32, 6), view);
  EXPECT_EQ(view.version(), b0 + 2);
  EXPECT_EQ(b.version(), b0 + 2) << "a view's write is its storage's";
  b.data<float>()[0] = 1.0f;
  EXPECT_EQ(b.version(), b0 + 2) << "a write through data() is not seen";
  b.note_write();
  EXPECT_EQ(b.version(), b0 + 3);
  EXPECT_EQ(Tensor::empty({4, 6}).version(), 0u);
}

TEST(Tensor, ChannelsLastIsAStrideOrder) {
  Tensor t = Tensor::empty({2, 3, 4, 5}, DType::f32, Device::cpu(), MemoryFormat::channels_last);
  EXPECT_EQ(t.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_TRUE(t.is_channels_last());
  EXPECT_FALSE(t.is_contiguous());
  Tensor src = testing::random_tensor({2, 3, 4, 5}, DType::f32, 1);
  copy_into(src, t);
  Tensor back = t.contiguous();
  EXPECT_EQ(back.to_vector<float>(), src.to_vector<float>());
}

// Outputs "like x" keep channels-last only where it is not also contiguous (C == 1 or
// H == W == 1 are both) and only from rank 4 to rank 4.
TEST(Tensor, SuggestedFormatAndEmptyLike) {
  const auto cl = MemoryFormat::channels_last, nchw = MemoryFormat::contiguous;
  const Tensor a = Tensor::empty({2, 3, 4, 5}, DType::f32, Device::cpu(), cl);
  EXPECT_EQ(a.suggested_format(), cl);
  EXPECT_EQ(Tensor::empty({2, 3, 4, 5}).suggested_format(), nchw);
  EXPECT_EQ(Tensor::empty({2, 1, 4, 5}, DType::f32, Device::cpu(), cl).suggested_format(), nchw);
  EXPECT_EQ(Tensor::empty({2, 3, 1, 1}, DType::f32, Device::cpu(), cl).suggested_format(), nchw);
  const Tensor y = Tensor::empty_like(a, {2, 7, 2, 2}, DType::bf16);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(y.is_channels_last() && !y.is_contiguous());
  EXPECT_TRUE(Tensor::empty_like(a, {2, 3}).is_contiguous());
  EXPECT_EQ(Tensor::empty_like(a, {2, 3}).dtype(), DType::f32);
}

// Tensors placed in a storage that exists (direct mode's arenas): the offset and the
// layout as Tensor::empty would give them; what does not fit, aligned, is an error.
TEST(Tensor, InStoragePlacesATensorWhereAsked) {
  auto storage = std::make_shared<Storage>(1024, Device::cpu(), allocator_for(Device::cpu()));
  const Tensor a = Tensor::in_storage(storage, 256, Shape{2, 3, 4, 5}, DType::f32, MemoryFormat::channels_last);
  EXPECT_EQ(static_cast<const char*>(a.data_ptr()) - static_cast<const char*>(storage->data()), 256);
  EXPECT_EQ(a.strides(), Tensor::empty(Shape{2, 3, 4, 5}, DType::f32, Device::cpu(), MemoryFormat::channels_last).strides());
  EXPECT_EQ(a.device(), Device::cpu());
  EXPECT_EQ(Tensor::format_like(a, Shape{2, 6, 4, 5}), MemoryFormat::channels_last);
  EXPECT_EQ(Tensor::format_like(a, Shape{2, 6}), MemoryFormat::contiguous);
  EXPECT_STRATA_ERROR(Tensor::in_storage(storage, 1000, Shape{8}, DType::f32), "Tensor::in_storage",
                      "does not fit", "1024 bytes");
  EXPECT_STRATA_ERROR(Tensor::in_storage(storage, 2, Shape{8}, DType::f32), "Tensor::in_storage", "at byte 2");
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = t.view({3, 2});
  v.data<float>()[0] = 42;
  EXPECT_EQ(t.data<float>()[0], 42);
  Tensor tr = t.permute({1, 0});
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.contiguous().to_vector<float>(), (std::vector<float>{42, 4, 2, 5, 3, 6}));
  Tensor n = t.narrow(1, 1, 2);
  EXPECT_EQ(n.to_vector<float>(), (std::vector<float>{2, 3, 5, 6}));
  EXPECT_EQ(t.view({-1}).sizes(), (Shape{6}));
}

TEST(Tensor, BadViewsAreClearErrors) {
  Tensor t = Tensor::empty({2, 3});
  EXPECT_STRATA_ERROR(t.view({4, 2}), "view", "[4,2]");
  EXPECT_STRATA_ERROR(t.permute({1, 0}).view({6}), "contiguous");
  EXPECT_STRATA_ERROR(t.narrow(1, 2, 2), "narrow", "out of bounds");
  EXPECT_STRATA_ERROR(t.as_strided({10}, {1}, 0), "past the storage");
  EXPECT_STRATA_ERROR(t.permute({0, 0}), "permutation");
}

TEST(Tensor, HugeSizesOverflowCleanly) {
  EXPECT_STRATA_ERROR(Tensor::empty({int64_t(1) << 40, int64_t(1) << 40}), "overflows");
  EXPECT_STRATA_ERROR(Tensor::empty({-1, 2}), "negative");
}

TEST(Tensor, CpuOutOfMemoryIsAnError) {
  // 2^50 bytes: no machine of ours has that; the allocator must say so, not abort.
  EXPECT_STRATA_ERROR(Tensor::empty({int64_t(1) << 48}, DType::f32), "out of memory");
  Tensor ok = Tensor::empty({4});
  EXPECT_EQ(ok.numel(), 4);
}

TEST(Tensor, CudaWithoutBackendIsAnError) {
  if (std::getenv("STRATA_EXPECT_GPU")) GTEST_SKIP() << "a GPU allocator may be registered";
  EXPECT_STRATA_ERROR(Tensor::empty({2}, DType::f32, Device::cuda(0)), "cuda:0");
}

TEST(Tensor, DtypeConversionInCopy) {
  Tensor a = Tensor::from_vector<double>({1.5, -2.25, 3.0}, {3});
  Tensor b = Tensor::empty({3}, DType::bf16);
  copy_into(a, b);
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{1.5, -2.25, 3.0}));
  Tensor i = Tensor::empty({3}, DType::i64);
  copy_into(a, i);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3}));
}

TEST(Tensor, GradFieldsAreSharedAcrossHandles) {
  Tensor a = Tensor::empty({2});
  Tensor b = a;
  a.set_requires_grad(true);
  EXPECT_TRUE(b.requires_grad());
  EXPECT_STRATA_ERROR(Tensor::empty({2}, DType::i64).set_requires_grad(true), "floating");
}

TEST(Device, Parse) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(parse_device("cuda:1"), Device::cuda(1));
  EXPECT_STRATA_ERROR(parse_device("tpu"), "tpu");
  EXPECT_STRATA_ERROR(parse_device("cuda:x"), "cuda:x");
}

}  // namespace
}  // namespace strata
