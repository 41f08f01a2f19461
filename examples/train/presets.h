#pragma once
// Dataset presets and model construction for strata_train and strata_infer.
//
// A preset knows where a dataset lives by default, how to read its train and test
// splits, its image shape after the loader's transforms, its classes, its
// normalisation and augmentation, and whether it is single-label (accuracy,
// softmax cross-entropy) or multi-label (mAP, binary cross-entropy with logits).
//
//   fashion-mnist  IDX, 1x28x28, 10 classes (default dir: Debian's dataset-fashion-mnist)
//   mnist          IDX, 1x28x28, 10 classes
//   cifar10        binary batches, 3x32x32, 10 classes
//   stl10          binary, 3x96x96, 10 classes
//   voc            PASCAL VOC JPEG + XML, 3xRxR (R = --resolution), 20 labels, mAP
//   imagefolder    DIR/{train,val}/<class>/<image> as torchvision's ImageFolder (ImageNet), 3xRxR
//                  (R = --resolution, default 224), classes from the folder names
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/data/transforms.h"
#include "strata/nn/model.h"

namespace strata::train {

enum class Task { classification, multilabel };

struct DatasetPreset {
  std::string name;
  std::string default_dir;  // "" when there is no conventional location
  std::string format;       // the files --data-dir must hold (--help, examples/README.md, errors)
  std::string get_data;     // how to get them
  bool idx = false;         // stored as IDX files (what strata_infer --idx reads)
  Task task = Task::classification;
  int64_t channels = 1;
  int64_t num_classes = 10;  // 0: as many as the training folder holds (imagefolder)
  std::vector<std::string> class_names;
  data::Normalize normalize;
  bool augment_by_default = false;
  int default_epochs = 3;
};

// The presets in CLI order; dataset_preset() throws strata::Error listing them.
const std::vector<DatasetPreset>& dataset_presets();
const DatasetPreset& dataset_preset(std::string_view name);
std::vector<std::string> dataset_names();
// "<format>; get it with <get_data>", for the errors about a missing directory.
std::string data_hint(const DatasetPreset& p);
// Throws strata::Error, with the hint, when `dir` is empty.
void require_data_dir(const DatasetPreset& p, const std::string& dir);
// Every preset with its files and how to get them, for strata_train --help.
std::string describe_presets();

// `base` restricted to its first `limit` items (limit <= 0 or >= size: base itself).
std::shared_ptr<const data::Dataset> limit_dataset(std::shared_ptr<const data::Dataset> base, int64_t limit);

// Reads one split from `dir` (train: the training set; test: the test set, or for VOC
// the image set `voc_test_set`, for imagefolder DIR/val). resolution applies to STL-10 (resized
// when not 96), VOC and imagefolder; 0 keeps the dataset's own size (VOC, imagefolder: 224).
// imagefolder's training images are RandomResizedCrop to R, its test images Resize(R * 8 / 7) +
// CenterCrop(R) (256 and 224 at R = 224). Errors name the files.
struct DataRequest {
  std::string dir;
  int64_t resolution = 0;
  std::string voc_train_set = "trainval";
  std::string voc_test_set = "test";
  bool augment = true;  // imagefolder: false trains on the test geometry (Resize + CenterCrop) too
};
std::shared_ptr<const data::Dataset> load_split(const DatasetPreset& p, const DataRequest& r, data::Split split);

// Loader transforms: train (augmentation when `augment`, then normalisation) or
// test (normalisation, plus a resize to `resolution` where the dataset needs one).
std::vector<data::Transform> make_transforms(const DatasetPreset& p, bool train, bool augment,
                                             const Shape& image_chw, int64_t resolution);

// What a model is built from; saved in every checkpoint's metadata so strata_infer
// can rebuild the network without being told its architecture.
struct ModelSpec {
  std::string model = "lenet";  // lenet | resnet18 | resnet50
  std::string lenet_variant = "tensorflow";
  int64_t base_channels = 64;  // resnet width
  int64_t in_channels = 1;
  int64_t image_size = 28;  // square side the model is built for
  int64_t num_classes = 10;  // 0: as many as the training folder holds (imagefolder)
  std::string init;  // "" -> the model's default (lenet: pytorch_default, resnet: kaiming_normal_fan_out)
  bool zero_last_bn_gamma = false;
  uint64_t seed = 1;
  Task task = Task::classification;
  std::string precision = "fp32";  // fp32 | bf16 (mixed precision, see nn::ModelOptions)
  // nn::ModelOptions::memory_format (nullopt: the backend's preferred layout); not saved, checkpoints
  // hold the same values in every layout.
  std::optional<MemoryFormat> memory_format;
  // ResNet's stem: the small-input one (3x3, no pooling) or ImageNet's; nullopt: small for images of at
  // most 64 px. Not saved: strata_train never sets it, so a checkpoint's image size decides.
  std::optional<bool> small_input;
};

inline const char* const kModelNames[] = {"lenet", "resnet18", "resnet50"};
std::string_view default_init(std::string_view model);
// Throws strata::Error for an unknown model, variant or init policy.
std::unique_ptr<nn::Model> build_model(const ModelSpec& s, ops::DispatchMode mode, const std::string& backend);

// "strata.train.*" metadata entries and back.
void write_spec(const ModelSpec& s, const std::string& dataset, std::map<std::string, std::string>& meta);
ModelSpec read_spec(const std::map<std::string, std::string>& meta, const std::string& path, std::string* dataset);

}  // namespace strata::train
