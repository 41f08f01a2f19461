// Test helper: writes item N of an MNIST-layout directory's test split as a greyscale
// PNG with stb_image_write, so strata_infer can be run on the same pixels as --image
// and as --idx (tests/examples/CMakeLists.txt).
//   idx_item_to_png DIR N OUT.png
#include <stb_image_write.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "strata/data/idx.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: idx_item_to_png DIR N OUT.png\n");
    return 2;
  }
  try {
    const strata::data::InMemoryDataset ds = strata::data::load_mnist_dir(argv[1], strata::data::Split::test, "idx");
    const int64_t n = std::atoll(argv[2]);
    const strata::Tensor images = ds.images();  // u8 [N,1,H,W]
    if (n < 0 || n >= images.size(0)) {
      std::fprintf(stderr, "idx_item_to_png: item %lld out of range\n", static_cast<long long>(n));
      return 2;
    }
    const strata::Tensor item = images.narrow(0, n, 1).contiguous();
    const int h = static_cast<int>(images.size(2)), w = static_cast<int>(images.size(3));
    if (stbi_write_png(argv[3], w, h, 1, item.data<uint8_t>(), w) == 0) {
      std::fprintf(stderr, "idx_item_to_png: cannot write %s\n", argv[3]);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idx_item_to_png: %s\n", e.what());
    return 1;
  }
}
