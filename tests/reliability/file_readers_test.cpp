// Every reader of strata against files that are not regular files. The readers share
// core/file.h's read_regular_file; this checks that each of them goes through it: a
// directory, a FIFO, a socket, a link to /dev/zero and (where mknod is permitted)
// copies of /dev/zero and /dev/urandom must each give a strata::Error naming the path
// and what it is, within a second — never a hang (a FIFO without a writer) or an
// unbounded read (a device that never ends).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>

#include "strata/data/cifar10.h"
#include "strata/data/idx.h"
#include "strata/data/image.h"
#include "strata/data/stl10.h"
#include "strata/data/voc.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/safetensors.h"
#include "support/expect_error.h"
#include "support/special_files.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using Reader = std::function<void(const fs::path&)>;

struct NamedReader {
  const char* name;
  Reader read;
};

std::vector<NamedReader> readers() {
  return {
      {"idx_images", [](const fs::path& p) { data::read_idx_images(p); }},
      {"idx_labels", [](const fs::path& p) { data::read_idx_labels(p); }},
      {"cifar10", [](const fs::path& p) { data::read_cifar10_batches({p}, "cifar-10 test"); }},
      {"stl10_images", [](const fs::path& p) { data::read_stl10_images(p); }},
      {"stl10_labels", [](const fs::path& p) { data::read_stl10_labels(p); }},
      {"voc_annotation", [](const fs::path& p) { data::parse_voc_annotation(p, false); }},
      {"image", [](const fs::path& p) { data::read_image_file(p); }},
      {"safetensors", [](const fs::path& p) { nn::safetensors::load(p.string()); }},
      {"checkpoint",
       [](const fs::path& p) {
         nn::Linear<ops::VirtualDispatch> m(ops::VirtualDispatch(backends::registry().get("reference")), 2, 2);
         nn::load_checkpoint(p.string(), m);
       }},
  };
}

TEST(FileReaders, EveryReaderRefusesEveryNonRegularFileAtOnce) {
  const fs::path dir = fs::temp_directory_path() / ("strata_file_readers_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<SpecialFile> specials = make_special_files(dir);
  int cases = 0;
  for (const NamedReader& r : readers()) {
    for (const SpecialFile& s : specials) {
      SCOPED_TRACE(std::string(r.name) + " on " + s.label);
      auto done = std::async(std::launch::async, [&]() -> std::string {
        try {
          r.read(s.path);
          return "(no error)";
        } catch (const Error& e) {
          return e.what();
        }
      });
      if (done.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
        ADD_FAILURE() << "no answer within a second: the reader hangs or reads without end";
        const int fd = ::open(s.path.c_str(), O_WRONLY | O_NONBLOCK);  // unblocks a FIFO reader
        if (fd >= 0) ::close(fd);
      }
      EXPECT_TRUE(message_contains(done.get(), {s.path.c_str(), s.kind.c_str(), "not a regular file"}));
      ++cases;
    }
  }
  RecordProperty("cases", cases);
  if (specials.size() < 6) std::printf("note: mknod not permitted here: device-node copies not tested\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
