#pragma once
// Where the files that strata_train's and strata_infer's messages name (tools/get-data.sh,
// tools/setup-deps.sh, docs/threads.md) are for the program being run, so that a message
// never sends a user to a path that does not exist where they are:
//   installed  <prefix>/share/strata/<relative>, found from the program's own location
//              (<prefix>/bin/...), so an install moved to another prefix still finds them;
//   build tree the source tree's <relative> (the source directory the build was configured from);
//   neither    "strata's <relative>", a name rather than a path.
// The installed copies come from the install rules beside the programs' (examples/CMakeLists.txt).
#include <filesystem>
#include <string>
#include <string_view>

namespace strata::train {

// `relative` as a path from the top of strata's source tree ("tools/get-data.sh").
std::string resource_path(std::string_view relative);

// The same, looked up from a given program file and source tree (what resource_path does with
// /proc/self/exe and the configured source directory); for tests.
std::string resource_path(std::string_view relative, const std::filesystem::path& program,
                          const std::filesystem::path& source_dir);

}  // namespace strata::train
