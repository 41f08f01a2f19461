#include "strata/core/version.h"

#include <cstdio>

namespace strata {

// STRATA_VERSION comes from project(VERSION ...) in the top-level CMakeLists.txt.
std::string_view version() { return STRATA_VERSION; }

std::string version_line(std::string_view program) {
  return std::string(program) + " (strata) " + std::string(version());
}

bool print_version_if_asked(int argc, char** argv, std::string_view program) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--version") {
      std::printf("%s\n", version_line(program).c_str());
      return true;
    }
  return false;
}

}  // namespace strata
