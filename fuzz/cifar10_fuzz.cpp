// CIFAR-10 binary batch reader (data/cifar10.h).
#include "strata/data/cifar10.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  static fuzz::ScratchFile scratch("cifar10");
  const auto& path = scratch.write(data, size);
  fuzz::expect_ok_or_error([&] {
    const data::InMemoryDataset ds = data::read_cifar10_batches({path}, "fuzz");
    STRATA_FUZZ_ASSERT(ds.size() * data::kCifar10RecordBytes == static_cast<int64_t>(size));
    STRATA_FUZZ_ASSERT(ds.image_shape() == (Shape{3, 32, 32}));
  });
  return 0;
}
