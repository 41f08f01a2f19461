#include "strata/data/voc.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>

#include "strata/data/file_io.h"
#include "strata/data/jpeg.h"
#include "strata/data/loader.h"
#include "strata/data/resize.h"
#include "data_test_util.h"

namespace strata::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;
using testing::write_text;

Tensor solid(int64_t c, int64_t h, int64_t w, std::vector<uint8_t> colour) {
  std::vector<uint8_t> v(static_cast<size_t>(c * h * w));
  for (int64_t k = 0; k < c; ++k)
    for (int64_t p = 0; p < h * w; ++p) v[k * h * w + p] = colour[k];
  return Tensor::from_vector(v, Shape{c, h, w});
}

// Horizontal ramp: pixel = 16 * column in every channel.
Tensor ramp(int64_t h, int64_t w) {
  std::vector<uint8_t> v(static_cast<size_t>(3 * h * w));
  for (int64_t k = 0; k < 3; ++k)
    for (int64_t r = 0; r < h; ++r)
      for (int64_t c = 0; c < w; ++c) v[(k * h + r) * w + c] = static_cast<uint8_t>(16 * c);
  return Tensor::from_vector(v, Shape{3, h, w});
}

std::string annotation(const std::vector<std::pair<std::string, int>>& objects) {
  std::string s = "<annotation>\n  <folder>VOC2007</folder>\n  <filename>x.jpg</filename>\n";
  s += "  <size><width>40</width><height>30</height><depth>3</depth></size>\n";
  for (const auto& [name, difficult] : objects)
    s += "  <object>\n    <name>" + name + "</name>\n    <pose>Unspecified</pose>\n    <difficult>" +
         std::to_string(difficult) +
         "</difficult>\n    <bndbox><xmin>1</xmin><ymin>1</ymin><xmax>9</xmax><ymax>9</ymax></bndbox>\n  </object>\n";
  return s + "</annotation>\n";
}

// A three-image VOC tree: 000001 (solid colour, dog + difficult person + dog),
// 000002 (ramp, " car " with whitespace), 000003 (greyscale JPEG, tvmonitor).
void make_voc(const fs::path& root) {
  write_file(root / "JPEGImages" / "000001.jpg", encode_jpeg(solid(3, 30, 40, {200, 50, 10}), 100));
  write_file(root / "JPEGImages" / "000002.jpg", encode_jpeg(ramp(16, 16), 100));
  write_file(root / "JPEGImages" / "000003.jpg", encode_jpeg(solid(1, 20, 24, {77}), 100));
  write_text(root / "Annotations" / "000001.xml", annotation({{"dog", 0}, {"person", 1}, {"dog", 0}}));
  write_text(root / "Annotations" / "000002.xml", annotation({{"\n  car ", 0}}));
  write_text(root / "Annotations" / "000003.xml", annotation({{"tvmonitor", 0}}));
  write_text(root / "ImageSets" / "Main" / "train.txt", "000001\n000002\n\n000003\n");
  write_text(root / "ImageSets" / "Main" / "val.txt", "000002  1\n");  // class-file style line
}

std::vector<float> one_hot(std::initializer_list<const char*> names) {
  std::vector<float> t(kVocNumClasses, 0.0f);
  for (const char* n : names) t[voc_class_index(n)] = 1.0f;
  return t;
}

TEST(Voc, ClassListIsTheStandardOrder) {
  EXPECT_EQ(kVocClasses.front(), "aeroplane");
  EXPECT_EQ(voc_class_index("diningtable"), 10);
  EXPECT_EQ(voc_class_index("person"), 14);
  EXPECT_EQ(voc_class_index("tvmonitor"), 19);
  EXPECT_EQ(voc_class_index("unicorn"), -1);
}

TEST(Voc, JpegRoundTripAndGreyscale) {
  const std::vector<uint8_t> jpg = encode_jpeg(solid(3, 9, 17, {12, 130, 250}), 100);
  const Tensor t = decode_jpeg_chw(jpg.data(), jpg.size(), "mem");
  ASSERT_EQ(t.sizes(), (Shape{3, 9, 17}));
  const std::vector<uint8_t> v = t.to_vector<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < 9 * 17; ++p) ASSERT_NEAR(v[c * 153 + p], (std::vector<int>{12, 130, 250})[c], 2);
  const std::vector<uint8_t> grey = encode_jpeg(solid(1, 8, 8, {77}), 100);
  const DecodedImage g = decode_jpeg(grey.data(), grey.size(), "mem");
  EXPECT_EQ(g.height, 8);
  for (uint8_t p : g.pixels) EXPECT_EQ(p, 77);
}

TEST(Voc, ReadsTreeTargetsAndResizedImages) {
  TempDir dir;
  make_voc(dir.path());
  const VocDataset ds(dir.path(), "train", {.resolution = 8});
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.ids(), (std::vector<std::string>{"000001", "000002", "000003"}));
  EXPECT_EQ(ds.image_shape(), (Shape{3, 8, 8}));
  EXPECT_EQ(ds.target_shape(), (Shape{20}));
  const std::vector<std::filesystem::path> files = ds.source_files();
  ASSERT_EQ(files.size(), 7u);  // the image set, then each annotation and JPEG
  EXPECT_EQ(files[0], dir.path() / "ImageSets" / "Main" / "train.txt");
  EXPECT_EQ(files[5], dir.path() / "Annotations" / "000003.xml");
  EXPECT_EQ(files[6], dir.path() / "JPEGImages" / "000003.jpg");

  const Example a = ds.get(0);
  EXPECT_EQ(a.target.to_vector<float>(), one_hot({"dog", "person"}));
  const std::vector<uint8_t> pa = a.image.to_vector<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < 64; ++p) ASSERT_NEAR(pa[c * 64 + p], (std::vector<int>{200, 50, 10})[c], 2);

  // 16 -> 8 columns: output column x averages source columns 2x and 2x+1 -> 32x + 8.
  const Example b = ds.get(1);
  EXPECT_EQ(b.target.to_vector<float>(), one_hot({"car"}));
  const std::vector<uint8_t> pb = b.image.to_vector<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t r = 0; r < 8; ++r)
      for (int64_t x = 0; x < 8; ++x) ASSERT_NEAR(pb[(c * 8 + r) * 8 + x], 32 * x + 8, 3) << c << r << x;

  const Example g = ds.get(2);
  EXPECT_EQ(g.target.to_vector<float>(), one_hot({"tvmonitor"}));
  for (uint8_t p : g.image.to_vector<uint8_t>()) EXPECT_EQ(p, 77);

  EXPECT_EQ(ds.targets().sizes(), (Shape{3, 20}));
  EXPECT_EQ(VocDataset(dir.path(), "val").ids(), std::vector<std::string>{"000002"});
  EXPECT_ERROR_MENTIONS(ds.get(3), "out of range");
}

TEST(Voc, DifficultObjectsCanBeExcluded) {
  TempDir dir;
  make_voc(dir.path());
  const VocDataset ds(dir.path(), "train", {.resolution = 4, .include_difficult = false});
  EXPECT_EQ(ds.get(0).target.to_vector<float>(), one_hot({"dog"}));
}

TEST(Voc, LoaderBatchesMultiLabelTargets) {
  TempDir dir;
  make_voc(dir.path());
  auto ds = std::make_shared<VocDataset>(dir.path(), "train", VocOptions{.resolution = 6});
  Loader loader(ds, {.batch_size = 2, .shuffle = false, .num_workers = 2});
  auto b = loader.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->images.sizes(), (Shape{2, 3, 6, 6}));
  ASSERT_EQ(b->targets.sizes(), (Shape{2, 20}));
  std::vector<float> expect = one_hot({"dog", "person"});
  const std::vector<float> car = one_hot({"car"});
  expect.insert(expect.end(), car.begin(), car.end());
  EXPECT_EQ(b->targets.to_vector<float>(), expect);
  EXPECT_NEAR(b->images.to_vector<float>()[0], 200.0f / 255.0f, 2.5f / 255.0f);
  b = loader.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->targets.sizes(), (Shape{1, 20}));
  EXPECT_FALSE(loader.next());
}

struct BrokenCase {
  const char* what;
  std::function<void(const fs::path&)> damage;
  const char* file_mentioned;
  const char* says;
};

TEST(Voc, BrokenTreesAreErrorsNamingTheFile) {
  const std::vector<BrokenCase> cases = {
      {"missing image set", [](const fs::path& r) { fs::remove(r / "ImageSets/Main/train.txt"); }, "train.txt",
       "no such file"},
      {"empty image set", [](const fs::path& r) { write_text(r / "ImageSets/Main/train.txt", "\n\n"); }, "train.txt",
       "no image ids"},
      {"missing annotation", [](const fs::path& r) { fs::remove(r / "Annotations/000002.xml"); }, "000002.xml",
       "no such file"},
      {"malformed xml",
       [](const fs::path& r) { write_text(r / "Annotations/000002.xml", "<annotation><object><name>dog</name>"); },
       "000002.xml", "malformed XML"},
      {"no root", [](const fs::path& r) { write_text(r / "Annotations/000002.xml", "<foo/>"); }, "000002.xml",
       "no <annotation>"},
      {"object without name",
       [](const fs::path& r) {
         write_text(r / "Annotations/000003.xml", "<annotation><object><pose>x</pose></object></annotation>");
       },
       "000003.xml", "has no <name>"},
      {"empty name",
       [](const fs::path& r) { write_text(r / "Annotations/000003.xml", annotation({{"  ", 0}})); }, "000003.xml",
       "empty <name>"},
      {"unknown class",
       [](const fs::path& r) { write_text(r / "Annotations/000001.xml", annotation({{"dog", 0}, {"unicorn", 0}})); },
       "000001.xml", "unknown class name 'unicorn'"},
      {"no objects", [](const fs::path& r) { write_text(r / "Annotations/000001.xml", annotation({})); },
       "000001.xml", "no <object>"},
      {"missing jpeg", [](const fs::path& r) { fs::remove(r / "JPEGImages/000003.jpg"); }, "000003.jpg",
       "no such file"},
  };
  for (const BrokenCase& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    make_voc(dir.path());
    c.damage(dir.path());
    EXPECT_ERROR_MENTIONS(VocDataset(dir.path(), "train"), c.file_mentioned);
    EXPECT_ERROR_MENTIONS(VocDataset(dir.path(), "train"), c.says);
  }
  TempDir dir;
  EXPECT_ERROR_MENTIONS(VocDataset(dir / "absent", "train"), "absent");
}

TEST(Voc, CorruptJpegsAreErrorsAtRead) {
  TempDir dir;
  make_voc(dir.path());
  const fs::path a = dir / "JPEGImages/000001.jpg", b = dir / "JPEGImages/000002.jpg";
  const std::vector<uint8_t> good = read_regular_file(b);
  write_text(a, "this is not a jpeg at all");
  write_file(b, std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2));  // truncated
  const VocDataset ds(dir.path(), "train", {.resolution = 8});
  EXPECT_ERROR_MENTIONS(ds.get(0), "000001.jpg");
  EXPECT_ERROR_MENTIONS(ds.get(0), "corrupt JPEG");
  EXPECT_ERROR_MENTIONS(ds.get(1), "000002.jpg");
  EXPECT_ERROR_MENTIONS(ds.get(1), "corrupt JPEG");
  EXPECT_NO_THROW(ds.get(2));
  write_file(a, {});
  EXPECT_ERROR_MENTIONS(ds.get(0), "empty");
}

TEST(Voc, CorruptJpegInAWorkerReachesTheConsumer) {
  TempDir dir;
  make_voc(dir.path());
  const fs::path b = dir / "JPEGImages/000002.jpg";
  const std::vector<uint8_t> good = read_regular_file(b);
  write_file(b, std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2));
  auto ds = std::make_shared<VocDataset>(dir.path(), "train", VocOptions{.resolution = 8});
  Loader loader(ds, {.batch_size = 1, .shuffle = false, .num_workers = 3});
  EXPECT_TRUE(loader.next());                                // 000001
  EXPECT_ERROR_MENTIONS(loader.next(), "000002.jpg");        // rethrown on the consumer
  EXPECT_TRUE(loader.next());                                // 000003: the loader carries on
  EXPECT_FALSE(loader.next());
}

}  // namespace
}  // namespace strata::data
