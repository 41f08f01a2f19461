#include "examples/train/presets.h"

#include <algorithm>
#include <filesystem>

#include "strata/core/file.h"
#include "strata/data/cifar10.h"
#include "strata/data/idx.h"
#include "strata/data/image_folder.h"
#include "strata/data/stl10.h"
#include "strata/data/voc.h"
#include "examples/train/checkpoint_meta.h"
#include "examples/train/resources.h"

namespace strata::train {

namespace {

std::vector<std::string> names_of(const char* const* first, size_t n) { return {first, first + n}; }

std::vector<DatasetPreset> make_presets() {
  const std::string get_data = resource_path("tools/get-data.sh");
  std::vector<DatasetPreset> v;
  DatasetPreset fm;
  fm.name = "fashion-mnist";
  fm.default_dir = data::kDebianFashionMnistDir;
  fm.format = "DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (IDX)";
  fm.get_data = "Debian's dataset-fashion-mnist (" + resource_path("tools/setup-deps.sh") + " installs it)";
  fm.idx = true;
  fm.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  fm.normalize = data::norm::fashion_mnist();
  v.push_back(fm);

  DatasetPreset mn = fm;
  mn.name = "mnist";
  mn.default_dir = "";
  mn.get_data = get_data + " mnist DIR";
  mn.class_names = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  mn.normalize = data::norm::mnist();
  v.push_back(mn);

  DatasetPreset c10;
  c10.name = "cifar10";
  c10.format = "DIR/data_batch_{1..5}.bin and DIR/test_batch.bin, or the same in DIR/cifar-10-batches-bin/ "
               "(CIFAR-10 binary version)";
  c10.get_data = get_data + " cifar10 DIR";
  c10.channels = 3;
  c10.class_names = names_of(data::kCifar10Classes, 10);
  c10.normalize = data::norm::cifar10();
  c10.augment_by_default = true;
  c10.default_epochs = 30;
  v.push_back(c10);

  DatasetPreset stl = c10;
  stl.name = "stl10";
  stl.format = "DIR/{train,test}_{X,y}.bin, or the same in DIR/stl10_binary/ (STL-10 binary version)";
  stl.get_data = get_data + " stl10 DIR";
  stl.class_names = names_of(data::kStl10Classes, 10);
  stl.normalize = data::norm::stl10();
  v.push_back(stl);

  DatasetPreset voc;
  voc.name = "voc";
  voc.format = "DIR/ImageSets/Main/<set>.txt, DIR/Annotations/<id>.xml, DIR/JPEGImages/<id>.jpg: DIR is a "
               "PASCAL VOC year, e.g. VOCdevkit/VOC2007 (sets: --voc-train-set, --voc-test-set)";
  voc.get_data = get_data + " voc2007 D, then --data-dir D/VOCdevkit/VOC2007";
  voc.task = Task::multilabel;
  voc.channels = 3;
  voc.num_classes = data::kVocNumClasses;
  for (auto c : data::kVocClasses) voc.class_names.emplace_back(c);
  voc.normalize = data::norm::voc();
  voc.augment_by_default = true;
  voc.default_epochs = 20;
  v.push_back(voc);

  DatasetPreset folder;
  folder.name = "imagefolder";
  folder.format = "DIR/train/<class>/<image> and DIR/val/<class>/<image> (JPEG, PNG, PGM/PPM), one folder per "
                  "class as torchvision's ImageFolder reads it: ImageNet's ILSVRC2012 layout";
  folder.get_data = "ImageNet from image-net.org, its validation images moved into class folders";
  folder.channels = 3;
  folder.num_classes = 0;  // the training folder's
  folder.normalize = data::norm::imagenet();
  folder.augment_by_default = true;
  folder.default_epochs = 90;
  v.push_back(folder);
  return v;
}

// The first `limit_` items of a dataset (--train-limit, --test-limit).
class LimitedDataset final : public data::Dataset {
 public:
  LimitedDataset(std::shared_ptr<const data::Dataset> base, int64_t limit) : base_(std::move(base)), n_(limit) {}
  std::string name() const override { return base_->name() + " (first " + std::to_string(n_) + ")"; }
  int64_t size() const override { return n_; }
  Shape image_shape() const override { return base_->image_shape(); }
  Shape target_shape() const override { return base_->target_shape(); }
  DType target_dtype() const override { return base_->target_dtype(); }
  int64_t num_classes() const override { return base_->num_classes(); }
  void read(int64_t i, uint8_t* image, void* target) const override {
    check_index(i);
    base_->read(i, image, target);
  }
  void read_random(int64_t i, uint8_t* image, void* target, std::mt19937_64& rng) const override {
    check_index(i);
    base_->read_random(i, image, target, rng);
  }
  std::vector<std::filesystem::path> source_files() const override { return base_->source_files(); }

 private:
  std::shared_ptr<const data::Dataset> base_;
  int64_t n_;
};

}  // namespace

const std::vector<DatasetPreset>& dataset_presets() {
  static const std::vector<DatasetPreset> v = make_presets();
  return v;
}

const DatasetPreset& dataset_preset(std::string_view name) {
  for (const auto& p : dataset_presets())
    if (p.name == name) return p;
  std::string known;
  for (const auto& p : dataset_presets()) known += (known.empty() ? "" : ", ") + p.name;
  STRATA_FAIL("unknown dataset '", name, "' (known: ", known, ")");
}

std::vector<std::string> dataset_names() {
  std::vector<std::string> v;
  for (const auto& p : dataset_presets()) v.push_back(p.name);
  return v;
}

std::string data_hint(const DatasetPreset& p) { return "expected " + p.format + "; get it with " + p.get_data; }

void require_data_dir(const DatasetPreset& p, const std::string& dir) {
  STRATA_CHECK(!dir.empty(), p.name, ": no data directory given and the dataset has no default one; pass --data-dir (",
               data_hint(p), ")");
}

std::string describe_presets() {
  std::string s = "Dataset presets (--dataset) and the files --data-dir must hold:\n";
  for (const auto& p : dataset_presets()) {
    const std::string indent(17, ' ');
    s += "  " + p.name + std::string(indent.size() - 2 - std::min(p.name.size(), indent.size() - 3), ' ') +
         p.format + "\n";
    if (!p.default_dir.empty()) s += indent + "default DIR: " + p.default_dir + "\n";
    s += indent + "get it with " + p.get_data + "\n";
  }
  return s;
}

std::shared_ptr<const data::Dataset> limit_dataset(std::shared_ptr<const data::Dataset> base, int64_t limit) {
  if (limit <= 0 || limit >= base->size()) return base;
  return std::make_shared<LimitedDataset>(std::move(base), limit);
}

std::shared_ptr<const data::Dataset> load_split(const DatasetPreset& p, const DataRequest& r, data::Split split) {
  require_data_dir(p, r.dir);
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(r.dir, ec);
  STRATA_CHECK(st.type() != std::filesystem::file_type::not_found, p.name, ": data directory '", r.dir,
               "' does not exist; ", data_hint(p));
  STRATA_CHECK(!ec, p.name, ": data directory '", r.dir, "' cannot be examined: ", ec.message());
  STRATA_CHECK(std::filesystem::is_directory(st), p.name, ": --data-dir '", r.dir, "' is ",
               file_kind(r.dir).value_or("gone"), ", not a folder: give the folder that holds the dataset's files (",
               data_hint(p), ")");
  if (p.idx)
    return std::make_shared<data::InMemoryDataset>(data::load_mnist_dir(r.dir, split, p.name));
  if (p.name == "cifar10") return std::make_shared<data::InMemoryDataset>(data::load_cifar10(r.dir, split));
  if (p.name == "stl10") return std::make_shared<data::InMemoryDataset>(data::load_stl10(r.dir, split));
  if (p.name == "voc") {
    data::VocOptions o;
    if (r.resolution > 0) o.resolution = r.resolution;
    return std::make_shared<data::VocDataset>(r.dir, split == data::Split::train ? r.voc_train_set : r.voc_test_set,
                                              o);
  }
  if (p.name == "imagefolder") {
    const int64_t side = r.resolution > 0 ? r.resolution : 224;
    data::ImageFolderOptions o;
    if (split == data::Split::train && r.augment)
      o.geometry = data::RandomResizedCrop{.size = side};
    else  // torchvision's reference recipe: Resize(256) + CenterCrop(224), the same ratio at other sizes
      o.geometry = data::ResizeCenterCrop{.resize = (side * 8 + 6) / 7, .crop = side};
    return std::make_shared<data::ImageFolderDataset>(std::filesystem::path(r.dir) /
                                                          (split == data::Split::train ? "train" : "val"),
                                                      o);
  }
  STRATA_FAIL("dataset '", p.name, "' has no reader");
}

std::vector<data::Transform> make_transforms(const DatasetPreset& p, bool train, bool augment, const Shape& chw,
                                             int64_t resolution) {
  std::vector<data::Transform> ts;
  int64_t side = chw[1];
  // VOC and image folders are resized (and image folders cropped) by their readers; the others here,
  // before augmentation.
  if (p.name == "imagefolder") {
    if (train && augment) ts.push_back(data::RandomHorizontalFlip{0.5});
    ts.push_back(p.normalize);
    return ts;
  }
  if (p.task == Task::classification && resolution > 0 && resolution != side) {
    ts.push_back(data::Resize{resolution, resolution});
    side = resolution;
  }
  if (train && augment) {
    if (p.task == Task::classification) ts.push_back(data::PadRandomCrop{std::max<int64_t>(side / 8, 2), side, side});
    if (p.name != "mnist") ts.push_back(data::RandomHorizontalFlip{0.5});
  }
  ts.push_back(p.normalize);
  return ts;
}

std::string_view default_init(std::string_view model) {
  return model == "lenet" ? "pytorch_default" : "kaiming_normal_fan_out";
}

std::unique_ptr<nn::Model> build_model(const ModelSpec& s, ops::DispatchMode mode, const std::string& backend) {
  nn::InitConfig init;
  init.policy = nn::parse_init_policy(s.init.empty() ? default_init(s.model) : std::string_view(s.init));
  init.zero_last_bn_gamma = s.zero_last_bn_gamma;
  init.seed = s.seed;
  nn::ModelOptions mo;
  mo.loss = s.task == Task::multilabel ? nn::LossKind::bce_logits : nn::LossKind::cross_entropy;
  mo.compute_dtype = nn::parse_precision(s.precision);
  mo.memory_format = s.memory_format;
  if (s.model == "lenet") {
    nn::LeNetConfig c;
    c.variant = nn::parse_lenet_variant(s.lenet_variant);
    c.num_classes = s.num_classes;
    c.in_channels = s.in_channels;
    c.input_size = s.image_size;
    c.init = init;
    c.dropout_seed = s.seed;
    return nn::make_lenet(c, mode, backend, mo);
  }
  if (s.model == "resnet18" || s.model == "resnet50") {
    nn::ResNetConfig c;
    c.depth = s.model == "resnet18" ? 18 : 50;
    c.num_classes = s.num_classes;
    c.in_channels = s.in_channels;
    c.small_input = s.small_input.value_or(s.image_size <= 64);
    c.base_channels = s.base_channels;
    c.init = init;
    return nn::make_resnet(c, mode, backend, mo);
  }
  STRATA_FAIL("unknown model '", s.model, "' (known: lenet, resnet18, resnet50)");
}

void write_spec(const ModelSpec& s, const std::string& dataset, std::map<std::string, std::string>& m) {
  m["strata.train.dataset"] = dataset;
  m["strata.train.model"] = s.model;
  m["strata.train.lenet_variant"] = s.lenet_variant;
  m["strata.train.base_channels"] = std::to_string(s.base_channels);
  m["strata.train.in_channels"] = std::to_string(s.in_channels);
  m["strata.train.image_size"] = std::to_string(s.image_size);
  m["strata.train.num_classes"] = std::to_string(s.num_classes);
  m["strata.train.init"] = s.init.empty() ? std::string(default_init(s.model)) : s.init;
  m["strata.train.zero_last_bn_gamma"] = s.zero_last_bn_gamma ? "1" : "0";
  m["strata.train.seed"] = std::to_string(s.seed);
  m["strata.train.task"] = s.task == Task::multilabel ? "multilabel" : "classification";
}

ModelSpec read_spec(const std::map<std::string, std::string>& meta, const std::string& path, std::string* dataset) {
  const CheckpointMeta m(meta, path);
  const std::string k = "strata.train.";
  // Names strata knows, with the list of them from where they are defined.
  auto known = [&](const std::string& key, auto&& parse) {
    try {
      parse(m.text(key));
    } catch (const Error& e) {
      m.fail(key, std::string("is not valid: ") + e.what());
    }
    return m.text(key);
  };
  const std::string ds = known(k + "dataset", [](const std::string& v) { dataset_preset(v); });
  const DatasetPreset& p = dataset_preset(ds);
  if (dataset) *dataset = ds;
  ModelSpec s;
  s.model = m.one_of(k + "model", {"lenet", "resnet18", "resnet50"});
  s.lenet_variant = known(k + "lenet_variant", [](const std::string& v) { nn::parse_lenet_variant(v); });
  s.base_channels = m.integer(k + "base_channels", 1, 4096);
  s.in_channels = m.integer(k + "in_channels", 1, 4);
  s.image_size = m.integer(k + "image_size", 1, 4096);
  s.num_classes = m.integer(k + "num_classes", 1, 100000);
  s.init = known(k + "init", [](const std::string& v) { nn::parse_init_policy(v); });
  s.zero_last_bn_gamma = m.one_of(k + "zero_last_bn_gamma", {"0", "1"}) == "1";
  s.seed = m.unsigned_integer(k + "seed");
  s.task = m.one_of(k + "task", {"classification", "multilabel"}) == "multilabel" ? Task::multilabel
                                                                                   : Task::classification;
  // The spec must be one its dataset could have produced.
  if (s.in_channels != p.channels) m.fail(k + "in_channels", "disagrees with dataset '" + ds + "' (" +
                                                                  std::to_string(p.channels) + " channels)");
  if (p.num_classes > 0 && s.num_classes != p.num_classes)
    m.fail(k + "num_classes", "disagrees with dataset '" + ds + "' (" + std::to_string(p.num_classes) + " classes)");
  if (s.task != p.task) m.fail(k + "task", "disagrees with dataset '" + ds + "'");
  return s;
}

}  // namespace strata::train
