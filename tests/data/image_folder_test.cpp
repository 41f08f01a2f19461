// data/image_folder.h: torchvision ImageFolder's classes and sample order (recursive, os.walk's sorting,
// extensions in any case), lazy decoding with the crop geometry, every bad input refused naming the path,
// and loader batches that do not depend on num_workers.
#include "strata/data/image_folder.h"

#include <stb_image_write.h>

#include "strata/data/jpeg.h"
#include "strata/data/loader.h"
#include "data_test_util.h"

namespace strata::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;
using testing::write_text;

// An h x w colour JPEG whose pixels vary (so crops differ).
std::vector<uint8_t> jpeg(int64_t h, int64_t w, uint8_t base) {
  std::vector<uint8_t> v(static_cast<size_t>(3 * h * w));
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<uint8_t>(base + 7 * (k % w) + 3 * (k / w));
  return encode_jpeg(Tensor::from_vector(v, Shape{3, h, w}), 95);
}

// A 4x4 greyscale PNG holding 10 * (index of the pixel).
void write_grey_png(const fs::path& path) {
  std::vector<uint8_t> px(16);
  for (int k = 0; k < 16; ++k) px[k] = static_cast<uint8_t>(10 * k);
  ASSERT_NE(stbi_write_png(path.c_str(), 4, 4, 1, px.data(), 4), 0) << path;
}

// cat/{x.jpg, s/u/y.JPEG, s-t/w.jpeg, notes.txt}, dog/{1.jpg, 2.png}, and a stray file in the root.
void make_tree(const fs::path& root) {
  fs::create_directories(root / "cat" / "s" / "u");
  fs::create_directories(root / "cat" / "s-t");
  fs::create_directories(root / "dog");
  write_file(root / "cat" / "x.jpg", jpeg(20, 30, 10));
  write_file(root / "cat" / "s" / "u" / "y.JPEG", jpeg(30, 20, 40));
  write_file(root / "cat" / "s-t" / "w.jpeg", jpeg(16, 16, 70));
  write_text(root / "cat" / "notes.txt", "not an image, skipped as torchvision skips it");
  write_file(root / "dog" / "1.jpg", jpeg(24, 24, 100));
  write_grey_png(root / "dog" / "2.png");
  write_file(root / "stray.jpg", jpeg(8, 8, 0));  // not in a class folder: not a sample
}

TEST(ImageFolder, ClassesAndSamplesInTorchvisionOrder) {
  TempDir dir;
  make_tree(dir.path());
  const ImageFolderDataset ds(dir.path(), {ResizeCenterCrop{4, 4}});
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(ds.num_classes(), 2);
  ASSERT_EQ(ds.size(), 5);
  // os.walk sorted by folder path: "cat" < "cat/s-t" < "cat/s/u" ('-' sorts before '/').
  const std::vector<fs::path> want = {dir / "cat/x.jpg", dir / "cat/s-t/w.jpeg", dir / "cat/s/u/y.JPEG",
                                      dir / "dog/1.jpg", dir / "dog/2.png"};
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(ds.path(i), want[i]);
    EXPECT_EQ(ds.label(i), i < 3 ? 0 : 1);
  }
  EXPECT_EQ(ds.source_files(), want);
  EXPECT_EQ(ds.image_shape(), (Shape{3, 4, 4}));
}

TEST(ImageFolder, DecodesLazilyWithTheGeometry) {
  TempDir dir;
  make_tree(dir.path());
  const ImageFolderDataset ds(dir.path(), {ResizeCenterCrop{4, 4}});
  // The greyscale PNG (lossless, already 4x4): its pixels in all three channels, label 1.
  const Example png = ds.get(4);
  EXPECT_EQ(png.target.item(), 1.0);
  const uint8_t* p = png.image.data<uint8_t>();
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 16; ++k) ASSERT_EQ(p[c * 16 + k], 10 * k) << "channel " << c << " pixel " << k;
  // A JPEG read through the same geometry as a direct decode + resize + central crop.
  const std::vector<uint8_t> bytes = jpeg(20, 30, 10);
  const DecodedImage d = decode_jpeg(bytes.data(), bytes.size(), "x.jpg");
  std::vector<uint8_t> want(48), scratch;
  std::mt19937_64 rng(0);
  apply_crop_geometry(ResizeCenterCrop{4, 4}, d.pixels.data(), 3, 20, 30, PixelLayout::hwc, want.data(), rng,
                      scratch);
  const Example x = ds.get(0);
  EXPECT_EQ(std::vector<uint8_t>(x.image.data<uint8_t>(), x.image.data<uint8_t>() + 48), want);
  // RandomResizedCrop decodes only its box: the same sample as a full decode and the crop there.
  const ImageFolderDataset train(dir.path(), {RandomResizedCrop{.size = 6}});
  for (uint64_t seed = 0; seed < 8; ++seed) {
    std::mt19937_64 a(seed), b(seed);
    std::vector<uint8_t> got(3 * 36), full(3 * 36);
    int64_t label = -1;
    train.read_random(0, got.data(), &label, a);
    apply_crop_geometry(RandomResizedCrop{.size = 6}, d.pixels.data(), 3, 20, 30, PixelLayout::hwc, full.data(), b,
                        scratch);
    EXPECT_EQ(got, full) << "seed " << seed;
    EXPECT_EQ(label, 0);
  }
  // Files are only listed when the dataset is built: breaking one afterwards fails its own sample.
  write_text(dir / "cat/x.jpg", "no longer a JPEG");
  EXPECT_ERROR_MENTIONS(ds.get(0), "x.jpg': not a JPEG, PNG or binary PGM/PPM image");
  EXPECT_NO_THROW(ds.get(3));
}

TEST(ImageFolder, RefusesBadFolders) {
  TempDir dir;
  EXPECT_ERROR_MENTIONS(ImageFolderDataset(dir / "missing"), "missing': no such folder");
  write_text(dir / "file", "x");
  EXPECT_ERROR_MENTIONS(ImageFolderDataset(dir / "file"), "is a regular file, not a folder of class folders");
  fs::create_directories(dir / "empty");
  write_file(dir / "empty" / "loose.jpg", jpeg(8, 8, 0));
  EXPECT_ERROR_MENTIONS(ImageFolderDataset(dir / "empty"), "no class folders in it");

  make_tree(dir / "t");
  fs::create_directories(dir / "t" / "eel");
  write_text(dir / "t" / "eel" / "readme.md", "no images here");
  EXPECT_ERROR_MENTIONS(ImageFolderDataset(dir / "t"), "1 class folder without images (.jpg, .jpeg, .png, .pgm, "
                                                       ".ppm in any case): '" + (dir / "t" / "eel").string() + "'");
  fs::remove_all(dir / "t" / "eel");
  write_file(dir / "t" / "dog" / "3.WebP", {0x52, 0x49, 0x46, 0x46});
  EXPECT_ERROR_MENTIONS(ImageFolderDataset(dir / "t"), "3.WebP' is a webp image, a format strata does not decode");
  fs::remove(dir / "t" / "dog" / "3.WebP");
  fs::create_directory_symlink(dir / "t" / "cat", dir / "t" / "cat" / "s" / "loop");
  EXPECT_ERROR_MENTIONS(ImageFolderDataset(dir / "t"), "is reached a second time through symbolic links");
  fs::remove(dir / "t" / "cat" / "s" / "loop");
  EXPECT_NO_THROW(ImageFolderDataset(dir / "t"));
  EXPECT_ERROR_MENTIONS(ImageFolderDataset(dir / "t", {RandomResizedCrop{.size = 0}}), "RandomResizedCrop: size");
}

TEST(ImageFolder, CorruptJpegNamedWhenItsSampleIsRead) {
  TempDir dir;
  make_tree(dir.path());
  std::vector<uint8_t> bytes = jpeg(20, 30, 10);
  bytes.resize(bytes.size() / 2);  // truncated
  write_file(dir / "dog" / "1.jpg", bytes);
  const ImageFolderDataset ds(dir.path());
  EXPECT_NO_THROW(ds.get(0));
  EXPECT_ERROR_MENTIONS(ds.get(3), "corrupt JPEG '" + (dir / "dog" / "1.jpg").string() + "'");
  EXPECT_ERROR_MENTIONS(ds.get(5), "index 5 out of range");
  // A CMYK JPEG is refused when read, naming it, by the training and the evaluation geometry alike.
  std::vector<uint8_t> cmyk(4 * 12 * 12, 90);
  write_file(dir / "cat" / "x.jpg", encode_jpeg(Tensor::from_vector(cmyk, Shape{4, 12, 12}), 90));
  EXPECT_ERROR_MENTIONS(ds.get(0), "JPEG '" + (dir / "cat" / "x.jpg").string() + "' is in CMYK");
  EXPECT_ERROR_MENTIONS(ImageFolderDataset(dir.path(), {ResizeCenterCrop{}}).get(0), "is in CMYK");
}

TEST(ImageFolder, LoaderBatchesDoNotDependOnWorkers) {
  TempDir dir;
  make_tree(dir.path());
  auto ds = std::make_shared<const ImageFolderDataset>(dir.path(), ImageFolderOptions{RandomResizedCrop{.size = 8}});
  auto epoch_images = [&](int workers, uint64_t seed) {
    LoaderOptions o;
    o.batch_size = 2;
    o.seed = seed;
    o.num_workers = workers;
    o.transforms = {RandomHorizontalFlip{0.5}, norm::imagenet()};
    Loader loader(ds, o);
    std::vector<float> all;
    loader.start_epoch(1);
    while (auto b = loader.next()) all.insert(all.end(), b->images.data<float>(),
                                              b->images.data<float>() + b->images.numel());
    EXPECT_GT(loader.stats().read_seconds, 0.0);
    return all;
  };
  const std::vector<float> one = epoch_images(0, 3);
  ASSERT_EQ(one.size(), 5u * 3 * 8 * 8);
  EXPECT_EQ(epoch_images(1, 3), one);
  EXPECT_EQ(epoch_images(3, 3), one);
  EXPECT_NE(epoch_images(2, 4), one);  // another seed: other crops (the test can fail)
}

}  // namespace
}  // namespace strata::data
