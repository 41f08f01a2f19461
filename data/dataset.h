#pragma once
// Dataset: a random-access collection of (image, target) pairs that all share one
// image shape. Images are u8 [C,H,W] (raw pixels, 0..255, row-major CHW); targets
// are either a class index (i64, shape []) or a multi-label vector (f32, shape [K]).
//
// read() is the batch-friendly entry point the Loader uses: it writes one item
// straight into caller-owned buffers and must be safe to call from several threads
// at once (the loader's workers). get() is a convenience that allocates tensors.
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::data {

enum class Split : uint8_t { train, test };
const char* split_name(Split s);

struct Example {
  Tensor image;   // u8 [C,H,W]
  Tensor target;  // i64 [] (class index) or f32 [K] (multi-label)
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual std::string name() const = 0;     // "fashion-mnist train", for messages and logs
  virtual int64_t size() const = 0;
  virtual Shape image_shape() const = 0;    // [C,H,W], identical for every item
  virtual Shape target_shape() const = 0;   // [] for a class index, [K] for multi-label
  virtual DType target_dtype() const = 0;   // i64 (class index) or f32 (multi-label)
  virtual int64_t num_classes() const = 0;

  // Writes item i: image_shape().numel() bytes to `image` (CHW), and the target to
  // `target` (one int64_t, or target_shape().numel() floats). Thread-safe.
  // Throws strata::Error for i out of range or unreadable data (naming the file).
  virtual void read(int64_t i, uint8_t* image, void* target) const = 0;

  // read() for the loader, with the per-sample generator it seeds from (seed, epoch, index) and then hands
  // on to the transforms. Datasets whose reading is random (an image folder's RandomResizedCrop) draw
  // from it, so a sample does not depend on the worker that reads it; the others ignore it.
  virtual void read_random(int64_t i, uint8_t* image, void* target, std::mt19937_64& rng) const {
    (void)rng;
    read(i, image, target);
  }

  // The files the dataset reads (or has read), so a program can refuse to write over
  // its own inputs. Empty for data that comes from no file.
  virtual std::vector<std::filesystem::path> source_files() const { return {}; }

  // Item i as freshly allocated tensors.
  Example get(int64_t i) const;

 protected:
  void check_index(int64_t i) const;  // throws naming the dataset and its size
};

// A dataset held in memory: images u8 [N,C,H,W] and labels i64 [N] in [0, num_classes).
// Used by the IDX, CIFAR-10 and STL-10 readers.
class InMemoryDataset final : public Dataset {
 public:
  // Validates shapes, dtypes and the label range; throws strata::Error otherwise.
  // `files`: those the tensors were read from (source_files()).
  InMemoryDataset(std::string name, Tensor images, Tensor labels, int64_t num_classes,
                  std::vector<std::filesystem::path> files = {});

  std::string name() const override { return name_; }
  int64_t size() const override { return images_.size(0); }
  Shape image_shape() const override;
  Shape target_shape() const override { return Shape{}; }
  DType target_dtype() const override { return DType::i64; }
  int64_t num_classes() const override { return num_classes_; }
  void read(int64_t i, uint8_t* image, void* target) const override;
  std::vector<std::filesystem::path> source_files() const override { return files_; }

  const Tensor& images() const { return images_; }  // u8 [N,C,H,W], contiguous
  const Tensor& labels() const { return labels_; }  // i64 [N], contiguous

 private:
  std::string name_;
  Tensor images_, labels_;
  int64_t num_classes_;
  std::vector<std::filesystem::path> files_;
};

}  // namespace strata::data
