// The paths strata_train's messages name exist for the program being run: the installed copies under
// share/strata beside an installed program, the source tree's in a build tree (tests/consumer checks
// an installed strata_train end to end).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "examples/train/presets.h"
#include "examples/train/resources.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "#!/bin/sh\n";
}

TEST(Resources, InstalledCopyBesideTheProgramFirstThenTheSourceTree) {
  const fs::path root = temp_dir("resources");
  const fs::path prefix = root / "prefix", source = root / "source";
  touch(prefix / "bin" / "strata_train");
  touch(source / "tools" / "get-data.sh");
  // Only the source tree has it: the source tree's path.
  EXPECT_EQ(train::resource_path("tools/get-data.sh", prefix / "bin" / "strata_train", source),
            (source / "tools" / "get-data.sh").string());
  // Installed too: the installed copy, without "..".
  touch(prefix / "share" / "strata" / "tools" / "get-data.sh");
  EXPECT_EQ(train::resource_path("tools/get-data.sh", prefix / "bin" / "strata_train", source),
            fs::canonical(prefix / "share" / "strata" / "tools" / "get-data.sh").string());
  // Neither: a name, not a path that does not exist.
  EXPECT_EQ(train::resource_path("docs/threads.md", prefix / "bin" / "strata_train", source),
            "strata's docs/threads.md");
  EXPECT_EQ(train::resource_path("docs/threads.md", fs::path(), fs::path()), "strata's docs/threads.md");
  fs::remove_all(root);
}

// This test runs from the build tree: every file the messages name is the source tree's, and exists.
TEST(Resources, TheBuildTreesMessagesNameFilesThatExist) {
  for (const char* rel : {"tools/get-data.sh", "tools/setup-deps.sh", "docs/threads.md"}) {
    const std::string path = train::resource_path(rel);
    EXPECT_TRUE(fs::is_regular_file(path)) << rel << " -> " << path;
    EXPECT_TRUE(fs::path(path).is_absolute()) << path;
  }
  for (const auto& p : train::dataset_presets()) {
    if (p.name == "imagefolder") continue;  // ImageNet is fetched from image-net.org by hand, under its terms
    const std::string script = p.name == "fashion-mnist" ? "tools/setup-deps.sh" : "tools/get-data.sh";
    EXPECT_NE(p.get_data.find(train::resource_path(script)), std::string::npos) << p.name << ": " << p.get_data;
  }
}

}  // namespace
}  // namespace strata::testing
