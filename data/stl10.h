#pragma once
// STL-10 binary version (stl10_binary): train_X.bin / test_X.bin hold 96x96 colour
// images, 3*96*96 bytes each, as distributed for MATLAB: per image the red, green and
// blue planes, each plane stored column-major. train_y.bin / test_y.bin hold one byte
// per image, classes 1..10. The readers return row-major CHW images and labels 0..9.
// (unlabeled.bin can be read with read_stl10_images.)
#include <filesystem>

#include "strata/core/tensor.h"
#include "strata/data/dataset.h"

namespace strata::data {

inline constexpr int64_t kStl10Side = 96;
inline constexpr int64_t kStl10ImageBytes = 3 * kStl10Side * kStl10Side;

// X file -> u8 [N,3,96,96] (transposed to row-major per plane).
Tensor read_stl10_images(const std::filesystem::path& path);
// y file -> i64 [N], mapped from 1..10 to 0..9; any other byte is an error.
Tensor read_stl10_labels(const std::filesystem::path& path);

InMemoryDataset read_stl10(const std::filesystem::path& images, const std::filesystem::path& labels,
                           std::string name);

// `dir` holds {train,test}_{X,y}.bin; `dir/stl10_binary` is tried too.
InMemoryDataset load_stl10(const std::filesystem::path& dir, Split split);

inline constexpr const char* kStl10Classes[10] = {"airplane", "bird",  "car",    "cat",  "deer",
                                                  "dog",      "horse", "monkey", "ship", "truck"};

}  // namespace strata::data
