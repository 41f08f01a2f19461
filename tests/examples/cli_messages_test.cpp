// Messages of strata_train and strata_infer for inputs that are wrong in a way only
// the whole run can tell: they name the file and the right reason.
#include <filesystem>
#include <fstream>

#include "cli_fixture.h"
#include "strata/nn/safetensors.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

TEST_F(HostileCli, ACheckpointMissingATensorIsNamedWithItsFile) {
  nn::safetensors::Contents c = nn::safetensors::load(checkpoint().string());
  std::string removed;
  for (auto it = c.tensors.begin(); it != c.tensors.end(); ++it)
    if (it->first.rfind("optimizer.", 0) != 0) {
      removed = it->first;
      c.tensors.erase(it);
      break;
    }
  const fs::path p = dir() / "partial.safetensors";
  nn::safetensors::save(p.string(), c.tensors, c.metadata);
  EXPECT_TRUE(runtime_error(infer({"--checkpoint", p.string(), "--idx", data_dir().string()}),
                            {p.c_str(), "missing key(s)", removed.c_str()}));
  EXPECT_TRUE(runtime_error(train({"--resume", p.string(), "--epochs", "2"}), {p.c_str(), "missing key(s)"}));
}

TEST_F(HostileCli, BrokenImagesSayWhatIsWrongWithThem) {
  const struct {
    const char* name;
    std::string bytes;
    const char* says;
  } cases[] = {
      {"empty.pgm", "P5 0 0 255\n", "the image has no pixels (0x0)"},
      {"deep.pgm", std::string("P5 1 1 65535\n\x01\x02", 14), "only 8-bit PGM/PPM is supported (maxval 65535"},
      {"cut.ppm", "P6 4 4 255\nabc", "truncated PGM/PPM: 4x4x3 needs 48 bytes of pixels, the file has 3"},
      {"anim.gif", "GIF89a....", "not a JPEG, PNG or binary PGM/PPM image"},
      {"nothing.jpg", "", "the file is empty"},
      {"cut.jpg", "\xff\xd8\xff\xe0", "corrupt JPEG"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write(dir() / c.name, c.bytes);
    EXPECT_TRUE(runtime_error(infer({"--checkpoint", checkpoint().string(), "--image", (dir() / c.name).string()}),
                              {c.name, c.says}));
  }
}

TEST_F(HostileCli, IdxFilesWithoutImagesAreRefusedNamingThemBeforeTraining) {
  const fs::path no_train = write_synthetic_idx(dir() / "no_train", 0, 32, 1);
  ProgramResult r = train({"--data-dir", no_train.string()});
  EXPECT_TRUE(runtime_error(r, {"train-images-idx3-ubyte", "no images", "nothing to train on"}));
  EXPECT_FALSE(mentions(r.out, {"epoch 1/"})) << r.out;
  const fs::path no_test = write_synthetic_idx(dir() / "no_test", 64, 0, 1);
  r = train({"--data-dir", no_test.string()});
  EXPECT_TRUE(runtime_error(r, {"t10k-images-idx3-ubyte", "no images", "nothing to evaluate on"}));
  EXPECT_FALSE(mentions(r.out, {"epoch 1/"})) << r.out;
  r = infer({"--checkpoint", checkpoint().string(), "--idx", (no_test / "t10k-images-idx3-ubyte").string()});
  EXPECT_TRUE(runtime_error(r, {"--index 0 is out of range", "t10k-images-idx3-ubyte", "holds 0 images"}));
}

TEST_F(HostileCli, ACheckpointOfAnotherDatasetSaysSoInsteadOfNamingItsClassesSilently) {
  // A CIFAR-10 checkpoint asked about a Fashion-MNIST item.
  const fs::path cifar = dir() / "cifar";
  write_cifar(cifar, 4, 8, 1);
  const fs::path ck = dir() / "cifar.safetensors";
  ASSERT_TRUE(succeeded(train({"--dataset", "cifar10", "--data-dir", cifar.string(), "--no-augment", "--checkpoint",
                               ck.string(), "--train-limit", "0", "--test-limit", "0", "--batch-size", "8"})));
  const ProgramResult r = infer({"--checkpoint", ck.string(), "--idx", data_dir().string()});
  EXPECT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.err, {"warning", "trained on cifar10 (3x32x32 images)", "IDX item [1,28,28]",
                               "one of cifar10's classes"}))
      << r.err;
  EXPECT_FALSE(mentions(r.out, {"label"})) << r.out;
  EXPECT_FALSE(mentions(r.out, {"correct"}) || mentions(r.out, {"wrong"})) << r.out;
  // Its own kind of data: no warning, the label is compared.
  const ProgramResult same = infer({"--checkpoint", checkpoint().string(), "--idx", data_dir().string()});
  EXPECT_TRUE(succeeded(same));
  EXPECT_FALSE(mentions(same.err, {"warning"})) << same.err;
  EXPECT_TRUE(mentions(same.out, {"label"})) << same.out;
}

}  // namespace
}  // namespace strata::testing
