// The other dataset presets end to end on tiny files written in their real formats:
// CIFAR-10 (binary batches) with a narrow ResNet-18 and augmentation, and PASCAL VOC
// (JPEG + XML) as multi-label classification reported with mAP, and an image folder (ImageNet's layout)
// whose classes come from its folder names.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "strata/data/jpeg.h"
#include "strata/data/voc.h"
#include "examples/train/trainer.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& p, const std::string& s) { write_bytes(p, s.data(), s.size()); }

TEST(TrainPresets, Cifar10WithANarrowResNet18AndAugmentation) {
  const auto dir = temp_dir("cifar");
  write_cifar(dir, 4, 8, 1);  // 20 training images, 8 test images
  train::TrainOptions o = tiny_options(dir.string(), "reference", "direct");
  o.dataset = "cifar10";
  o.model = "resnet18";
  o.base_channels = 4;
  o.epochs = 1;
  o.batch_size = 8;
  o.metrics = (dir / "metrics.jsonl").string();
  const train::RunConfig cfg = train::resolve(o);
  EXPECT_EQ(cfg.o.augment, 1);  // cifar10's default
  train::Trainer t(cfg, nullptr, nullptr);
  EXPECT_NE(t.header().find("augmentation on"), std::string::npos) << t.header();
  EXPECT_NE(t.header().find("init kaiming_normal_fan_out"), std::string::npos) << t.header();
  EXPECT_EQ(t.spec().in_channels, 3);
  EXPECT_EQ(t.spec().image_size, 32);
  const train::RunResult r = t.run();
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(r.steps, 3);
  EXPECT_TRUE(std::isfinite(r.epochs[0].test_loss));
  std::ifstream f(o.metrics);
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j.at("dataset"), "cifar10");
  EXPECT_EQ(j.at("model"), "resnet18");
  EXPECT_TRUE(j.contains("test_accuracy"));
}

std::string annotation(const std::vector<std::string>& objects) {
  std::string s = "<annotation><size><width>32</width><height>32</height><depth>3</depth></size>";
  for (const auto& name : objects) s += "<object><name>" + name + "</name><difficult>0</difficult></object>";
  return s + "</annotation>\n";
}

// Images whose colour says which of three classes they hold.
void write_voc(const fs::path& root, int64_t train, int64_t test) {
  const char* classes[] = {"cat", "dog", "person"};
  std::string trainval, test_list;
  for (int64_t i = 0; i < train + test; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "%06lld", static_cast<long long>(i));
    std::vector<std::string> objects = {classes[i % 3]};
    if (i % 4 == 0) objects.push_back(classes[(i + 1) % 3]);
    std::vector<uint8_t> px(3 * 24 * 24);
    for (int k = 0; k < 3; ++k)
      for (int p = 0; p < 24 * 24; ++p) px[static_cast<size_t>(k * 576 + p)] = static_cast<uint8_t>(k == i % 3 ? 220 : 30);
    const auto jpg = data::encode_jpeg(Tensor::from_vector(px, Shape{3, 24, 24}), 95);
    write_bytes(root / "JPEGImages" / (std::string(id) + ".jpg"), jpg.data(), jpg.size());
    write_text(root / "Annotations" / (std::string(id) + ".xml"), annotation(objects));
    (i < train ? trainval : test_list) += std::string(id) + "\n";
  }
  write_text(root / "ImageSets" / "Main" / "trainval.txt", trainval);
  write_text(root / "ImageSets" / "Main" / "test.txt", test_list);
}

TEST(TrainPresets, VocIsMultiLabelAndReportsMeanAveragePrecision) {
  const auto dir = temp_dir("voc");
  write_voc(dir, 12, 9);
  train::TrainOptions o = tiny_options(dir.string(), "reference", "static");
  o.dataset = "voc";
  o.resolution = 32;
  o.epochs = 2;
  o.batch_size = 4;
  o.metrics = (dir / "metrics.jsonl").string();
  train::Trainer t(train::resolve(o), nullptr, nullptr);
  EXPECT_EQ(t.spec().task, train::Task::multilabel);
  EXPECT_EQ(t.spec().num_classes, 20);
  EXPECT_NE(t.model().describe().find("bce_logits"), std::string::npos) << t.model().describe();
  const train::RunResult r = t.run();
  ASSERT_EQ(r.epochs.size(), 2u);
  for (const auto& m : r.epochs) {
    EXPECT_TRUE(m.multilabel);
    EXPECT_GT(m.test_map, 0.0);  // only cat, dog and person have positives: the mean is over them
    EXPECT_LE(m.test_map, 1.0);
    EXPECT_TRUE(std::isnan(m.train_accuracy));
  }
  std::ifstream f(o.metrics);
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_TRUE(j.at("test_map").is_number());
  EXPECT_FALSE(j.contains("test_accuracy"));
  EXPECT_TRUE(j.at("train_accuracy").is_null());
}

// DIR/{train,val}/<class>/<image>: JPEGs of several sizes whose colour says the class.
void write_image_folder(const fs::path& root, const std::vector<std::string>& train_classes,
                        const std::vector<std::string>& val_classes) {
  for (const char* split : {"train", "val"}) {
    const auto& classes = std::string(split) == "train" ? train_classes : val_classes;
    for (size_t c = 0; c < classes.size(); ++c)
      for (int64_t i = 0; i < 3; ++i) {
        const int64_t h = 20 + 4 * i, w = 28 - 3 * i;
        std::vector<uint8_t> px(static_cast<size_t>(3 * h * w));
        for (size_t k = 0; k < px.size(); ++k)
          px[k] = static_cast<uint8_t>(k / static_cast<size_t>(h * w) == c % 3 ? 220 : 30);
        const auto jpg = data::encode_jpeg(Tensor::from_vector(px, Shape{3, h, w}), 90);
        write_bytes(root / split / classes[c] / (std::to_string(i) + ".JPEG"), jpg.data(), jpg.size());
      }
  }
}

TEST(TrainPresets, ImageFolderTakesItsClassesFromTheFolder) {
  const auto dir = temp_dir("imagefolder");
  write_image_folder(dir, {"ant", "bee", "cat", "dog"}, {"ant", "bee", "cat", "dog"});
  train::TrainOptions o = tiny_options(dir.string(), "reference", "direct");
  o.dataset = "imagefolder";
  o.model = "resnet18";
  o.base_channels = 4;
  o.resolution = 16;
  o.epochs = 1;
  o.batch_size = 4;
  o.channels_last = true;  // as ImageNet runs on the GPU
  const train::RunConfig cfg = train::resolve(o);
  EXPECT_EQ(cfg.o.augment, 1);  // RandomResizedCrop and flip by default
  train::Trainer t(cfg, nullptr, nullptr);
  EXPECT_NE(t.model().describe().find("channels_last"), std::string::npos) << t.model().describe();
  EXPECT_EQ(t.spec().num_classes, 4);
  EXPECT_EQ(t.spec().in_channels, 3);
  EXPECT_EQ(t.spec().image_size, 16);
  const train::RunResult r = t.run();
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(r.steps, 3);  // 12 training images
  EXPECT_TRUE(std::isfinite(r.epochs[0].test_loss));

  const auto other = temp_dir("imagefolder_mismatch");
  write_image_folder(other, {"ant", "bee", "cat"}, {"ant", "bee"});
  o.data_dir = other.string();
  try {
    train::Trainer bad(train::resolve(o), nullptr, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 class folders, but"), std::string::npos) << e.what();
  }
}

TEST(TrainPresets, MissingDataDirectoriesSayWhatToInstall) {
  train::TrainOptions o = tiny_options("/nonexistent/fashion", "reference", "direct");
  EXPECT_THROW(
      {
        try {
          train::Trainer t(train::resolve(o), nullptr, nullptr);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("dataset-fashion-mnist"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  o.dataset = "cifar10";
  o.data_dir = "";
  try {
    train::Trainer t(train::resolve(o), nullptr, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass --data-dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::testing
