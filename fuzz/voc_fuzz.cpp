// PASCAL VOC annotation reader (data/voc.h, pugixml underneath).
#include "strata/data/voc.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  static fuzz::ScratchFile scratch("voc");
  const auto& path = scratch.write(data, size);
  for (const bool include_difficult : {true, false}) {
    fuzz::expect_ok_or_error([&] {
      const auto target = data::parse_voc_annotation(path, include_difficult);
      for (float v : target) STRATA_FUZZ_ASSERT(v == 0.0f || v == 1.0f);
    });
  }
  return 0;
}
