// Image files of strata_infer --image (data/image.h): the shared regular-file reader
// (core/file.h), the PGM/PPM decoder and the JPEG decoder, chosen by the first bytes.
#include "strata/data/image.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  static fuzz::ScratchFile scratch("image");
  const auto& path = scratch.write(data, size);
  fuzz::expect_ok_or_error([&] {
    const Tensor t = data::read_image_file(path);
    STRATA_FUZZ_ASSERT(t.dim() == 3 && (t.size(0) == 1 || t.size(0) == 3) && t.dtype() == DType::u8);
    STRATA_FUZZ_ASSERT(t.size(1) > 0 && t.size(2) > 0 && t.is_contiguous());
    // A PGM/PPM holds its pixels uncompressed: it cannot decode to more than it holds.
    if (size >= 2 && data[0] == 'P') STRATA_FUZZ_ASSERT(static_cast<size_t>(t.numel()) <= size);
  });
  return 0;
}
