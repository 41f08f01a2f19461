// Hostile inputs given to strata_train and strata_infer: files that are not regular
// files where a checkpoint, an image or a dataset file is expected. Every one must be
// refused at once (exit 1, the path and what it is on stderr): none may hang (a FIFO
// without a writer) or read without end (a device such as /dev/zero).
#include <filesystem>

#include "cli_fixture.h"
#include "support/special_files.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kPromptly = 5.0;  // seconds: process start-up included, on a busy machine

TEST_F(HostileCli, CheckpointsThatAreNotRegularFilesAreRefusedAtOnce) {
  std::vector<SpecialFile> specials = make_special_files(dir());
  specials.push_back({"dev_zero", "/dev/zero", "a character device"});
  specials.push_back({"dev_urandom", "/dev/urandom", "a character device"});
  for (const SpecialFile& s : specials) {
    SCOPED_TRACE(s.label);
    ProgramResult r = infer({"--checkpoint", s.path.string(), "--idx", data_dir().string()});
    EXPECT_TRUE(runtime_error(r, {s.path.c_str(), s.kind.c_str(), "not a regular file"}));
    EXPECT_LT(r.seconds, kPromptly);
    r = train({"--resume", s.path.string()});
    EXPECT_TRUE(runtime_error(r, {s.path.c_str(), s.kind.c_str(), "not a regular file"}));
    EXPECT_LT(r.seconds, kPromptly);
  }
}

TEST_F(HostileCli, ImagesThatAreNotRegularFilesAreRefusedAtOnce) {
  std::vector<SpecialFile> specials = make_special_files(dir());
  specials.push_back({"dev_zero", "/dev/zero", "a character device"});
  for (const SpecialFile& s : specials) {
    SCOPED_TRACE(s.label);
    const ProgramResult r = infer({"--checkpoint", checkpoint().string(), "--image", s.path.string()});
    EXPECT_TRUE(runtime_error(r, {s.path.c_str(), s.kind.c_str(), "not a regular file"}));
    EXPECT_LT(r.seconds, kPromptly);
  }
  // An IDX file given to --idx, likewise.
  const fs::path fifo = make_fifo(dir(), "t10k-images-idx3-ubyte");
  const ProgramResult r = infer({"--checkpoint", checkpoint().string(), "--idx", fifo.string()});
  EXPECT_TRUE(runtime_error(r, {fifo.c_str(), "a FIFO (named pipe), not a regular file"}));
  EXPECT_LT(r.seconds, kPromptly);
}

TEST_F(HostileCli, DatasetFilesThatAreNotRegularFilesAreRefusedAtOnce) {
  // Fashion-MNIST's training images replaced by a FIFO, then by a link to /dev/zero.
  const fs::path idx = copy_of_data("idx");
  const fs::path images = idx / "train-images-idx3-ubyte";
  fs::remove(images);
  make_fifo(idx, "train-images-idx3-ubyte");
  ProgramResult r = train({"--data-dir", idx.string()});
  EXPECT_TRUE(runtime_error(r, {images.c_str(), "a FIFO (named pipe), not a regular file"}));
  EXPECT_LT(r.seconds, kPromptly);
  fs::remove(images);
  make_symlink(idx, "train-images-idx3-ubyte", "/dev/zero");
  r = train({"--data-dir", idx.string()});
  EXPECT_TRUE(runtime_error(r, {images.c_str(), "a character device, not a regular file"}));
  EXPECT_LT(r.seconds, kPromptly);
  // A CIFAR-10 test batch that is a FIFO.
  const fs::path cifar = dir() / "cifar";
  write_cifar(cifar, 2, 4, 1);
  fs::remove(cifar / "test_batch.bin");
  make_fifo(cifar, "test_batch.bin");
  r = train({"--dataset", "cifar10", "--data-dir", cifar.string(), "--width", "4", "--model", "resnet18"});
  EXPECT_TRUE(runtime_error(r, {"test_batch.bin", "a FIFO (named pipe), not a regular file"}));
  EXPECT_LT(r.seconds, kPromptly);
}

TEST_F(HostileCli, ADataDirThatIsNotAFolderSaysWhatItIs) {
  const fs::path file = data_dir() / "train-images-idx3-ubyte";
  ProgramResult r = train({"--data-dir", file.string()});
  EXPECT_TRUE(runtime_error(r, {"--data-dir", file.c_str(), "is a regular file, not a folder"}));
  EXPECT_FALSE(mentions(r.err, {"does not exist"})) << r.err;
  const fs::path fifo = make_fifo(dir(), "pipe");
  r = train({"--data-dir", fifo.string()});
  EXPECT_TRUE(runtime_error(r, {fifo.c_str(), "is a FIFO (named pipe), not a folder"}));
  EXPECT_LT(r.seconds, kPromptly);
  // Nothing there at all, or a file on the way to it: it does not exist.
  for (const fs::path& absent : {dir() / "absent", file / "sub"}) {
    r = train({"--data-dir", absent.string()});
    EXPECT_TRUE(runtime_error(r, {absent.c_str(), "does not exist"}));
  }
}

}  // namespace
}  // namespace strata::testing
