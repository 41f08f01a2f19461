#include "strata/data/dataset.h"

#include <cstring>

namespace strata::data {

const char* split_name(Split s) { return s == Split::train ? "train" : "test"; }

void Dataset::check_index(int64_t i) const {
  STRATA_CHECK(i >= 0 && i < size(), name(), ": index ", i, " out of range for a dataset of ", size(), " items");
}

Example Dataset::get(int64_t i) const {
  check_index(i);
  Example ex;
  ex.image = Tensor::empty(image_shape(), DType::u8);
  ex.target = Tensor::empty(target_shape(), target_dtype());
  read(i, ex.image.data<uint8_t>(), ex.target.data_ptr());
  return ex;
}

InMemoryDataset::InMemoryDataset(std::string name, Tensor images, Tensor labels, int64_t num_classes,
                                 std::vector<std::filesystem::path> files)
    : name_(std::move(name)), num_classes_(num_classes), files_(std::move(files)) {
  STRATA_CHECK(images.defined() && labels.defined(), name_, ": images and labels must be defined");
  STRATA_CHECK(images.dtype() == DType::u8 && images.dim() == 4 && images.device().is_cpu(), name_,
               ": images must be a cpu u8 [N,C,H,W] tensor, got ", images.str());
  STRATA_CHECK(labels.dtype() == DType::i64 && labels.dim() == 1 && labels.device().is_cpu(), name_,
               ": labels must be a cpu i64 [N] tensor, got ", labels.str());
  STRATA_CHECK(images.size(0) == labels.size(0), name_, ": ", images.size(0), " images but ", labels.size(0),
               " labels (images ", images.str(), ", labels ", labels.str(), ")");
  STRATA_CHECK(num_classes > 0, name_, ": num_classes must be positive, got ", num_classes);
  images_ = images.contiguous();
  labels_ = labels.contiguous();
  const int64_t* l = labels_.data<int64_t>();
  for (int64_t k = 0; k < labels_.numel(); ++k)
    STRATA_CHECK(l[k] >= 0 && l[k] < num_classes, name_, ": label ", l[k], " of item ", k,
                 " is outside [0, ", num_classes, ")");
}

Shape InMemoryDataset::image_shape() const {
  return Shape{images_.size(1), images_.size(2), images_.size(3)};
}

void InMemoryDataset::read(int64_t i, uint8_t* image, void* target) const {
  check_index(i);
  const int64_t per = images_.size(1) * images_.size(2) * images_.size(3);
  std::memcpy(image, images_.data<uint8_t>() + i * per, static_cast<size_t>(per));
  *static_cast<int64_t*>(target) = labels_.data<int64_t>()[i];
}

}  // namespace strata::data
