// Messages of strata_train and strata_infer for inputs that are wrong in a way only
// the whole run can tell: they name the file and the right reason.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "cli_fixture.h"
#include "strata/backends/api/registry.h"
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

TEST_F(HostileCli, BackendListsSayWhatIsBuiltWhatIsUsableHereAndWhyNot) {
  // This process asks the same probes (creating no backend): the programs must say the same.
  const std::string usable = backends::registry().describe_usable();
  EXPECT_NE(usable.find("usable here: "), std::string::npos) << usable;
  EXPECT_NE(usable.find("reference"), std::string::npos) << usable;
  if (const size_t u = usable.find("unavailable here: "); u != std::string::npos) {
    EXPECT_NE(usable.find(" (", u), std::string::npos) << "an unusable backend without its reason: " << usable;
  }
  ProgramResult r = train({"--backend", "tpu"});
  EXPECT_TRUE(usage_error(r, {"backend 'tpu' is not built into this strata; ", usable.c_str()}));
  EXPECT_FALSE(mentions(r.err, {"not initialised"})) << r.err;
  r = train({});
  ASSERT_TRUE(succeeded(r));
  EXPECT_TRUE(mentions(r.out, {("\nbackends: " + usable + "\n").c_str()})) << r.out;
  EXPECT_FALSE(mentions(r.out, {"not initialised"})) << r.out;
}

// "--name TYPE:VALIDATOR=DEFAULT   description": a numeric default lies in the option's range.
TEST_F(HostileCli, HelpShowsDefaultsThatApplyInsideTheOptionsRanges) {
  const ProgramResult r = train({"--help"});
  ASSERT_TRUE(succeeded(r));
  const std::regex line(R"(^\s+(--[a-z0-9-]+) ([^\s=]+(?: [^\s=]+)*)=(\S+)(\s\s|$))");
  const std::regex range(R"(in ([\[(])(-?[0-9.e+]+)(?: -|,) (-?[0-9.e+]+)\])");
  std::istringstream help(r.out);
  std::map<std::string, std::string> defaults;
  int ranged = 0;
  for (std::string text; std::getline(help, text);) {
    std::smatch m, b;
    if (!std::regex_search(text, m, line)) continue;
    const std::string option = m[1], type = m[2], shown = m[3];
    defaults[option] = shown;
    char* end = nullptr;
    const double v = std::strtod(shown.c_str(), &end);
    if (end == shown.c_str() || *end != '\0') continue;  // a word: "dataset's", "tensorflow"
    double lo = -INFINITY, hi = INFINITY;
    bool lo_open = false;
    if (std::regex_search(type, b, range)) {
      lo_open = b[1] == "(";
      lo = std::stod(b[2]);
      hi = std::stod(b[3]);
    } else if (type.find("NONNEGATIVE") != std::string::npos) {
      lo = 0;
    } else if (type.find("POSITIVE") != std::string::npos) {
      lo = 0, lo_open = true;
    } else {
      continue;
    }
    ++ranged;
    EXPECT_TRUE(v >= lo && v <= hi && !(lo_open && v == lo)) << option << " shows default " << shown
                                                              << " outside " << type;
  }
  EXPECT_GE(ranged, 10) << "the help's format changed: " << r.out;
  for (const char* option : {"--epochs", "--batch-size", "--lr", "--weight-decay"}) {
    SCOPED_TRACE(option);
    ASSERT_TRUE(defaults.count(option)) << r.out;
    EXPECT_TRUE(defaults[option] == "dataset's" || defaults[option] == "model's") << defaults[option];
  }
  EXPECT_EQ(defaults["--optimizer"], "sgd");
}

}  // namespace
}  // namespace strata::testing
