// IDX reader (data/idx.h): image and label files, plain or gzip (the reader decides by
// the magic bytes, so gzip inputs reach data/file_io.cpp's inflate loop too).
#include "strata/data/idx.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  static fuzz::ScratchFile scratch("idx");
  const auto& path = scratch.write(data, size);
  fuzz::expect_ok_or_error([&] {
    const Tensor t = data::read_idx_images(path);
    STRATA_FUZZ_ASSERT(t.dim() == 4 && t.size(1) == 1 && t.dtype() == DType::u8 && t.is_contiguous());
  });
  fuzz::expect_ok_or_error([&] {
    const Tensor t = data::read_idx_labels(path, 10);
    STRATA_FUZZ_ASSERT(t.dim() == 1 && t.dtype() == DType::i64);
    for (int64_t v : t.to_vector<int64_t>()) STRATA_FUZZ_ASSERT(v >= 0 && v < 10);
  });
  return 0;
}
