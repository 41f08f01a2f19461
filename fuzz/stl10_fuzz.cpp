// STL-10 binary readers (data/stl10.h): the same bytes as an image file and as a
// label file.
#include "strata/data/stl10.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  static fuzz::ScratchFile scratch("stl10");
  const auto& path = scratch.write(data, size);
  fuzz::expect_ok_or_error([&] {
    const Tensor t = data::read_stl10_images(path);
    STRATA_FUZZ_ASSERT(t.numel() == static_cast<int64_t>(size) && t.size(1) == 3 && t.size(2) == data::kStl10Side);
  });
  fuzz::expect_ok_or_error([&] {
    const Tensor t = data::read_stl10_labels(path);
    STRATA_FUZZ_ASSERT(t.numel() == static_cast<int64_t>(size));
    for (int64_t v : t.to_vector<int64_t>()) STRATA_FUZZ_ASSERT(v >= 0 && v < 10);
  });
  return 0;
}
