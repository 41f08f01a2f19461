#include "examples/train/resources.h"

#include <system_error>

#ifndef STRATA_SOURCE_DIR
#error "STRATA_SOURCE_DIR is not defined: build with examples/CMakeLists.txt"
#endif
#ifndef STRATA_SHARE_FROM_BIN
#error "STRATA_SHARE_FROM_BIN is not defined: build with examples/CMakeLists.txt"
#endif

namespace strata::train {

namespace fs = std::filesystem;

std::string resource_path(std::string_view relative, const fs::path& program, const fs::path& source_dir) {
  std::error_code ec;
  const fs::path rel(relative);
  if (!program.empty()) {
    const fs::path installed = program.parent_path() / STRATA_SHARE_FROM_BIN / rel;
    if (fs::is_regular_file(installed, ec)) return fs::weakly_canonical(installed, ec).string();
  }
  if (!source_dir.empty() && fs::is_regular_file(source_dir / rel, ec)) return (source_dir / rel).string();
  return "strata's " + std::string(relative);
}

std::string resource_path(std::string_view relative) {
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);  // empty where /proc is not mounted
  return resource_path(relative, ec ? fs::path() : program, STRATA_SOURCE_DIR);
}

}  // namespace strata::train
