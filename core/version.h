#pragma once
// strata's version, as CMake's project() declares it ("0.1.0"); every program's
// --version prints it.
#include <string>
#include <string_view>

namespace strata {

std::string_view version();
// What --version prints, in GNU's form: "strata_train (strata) 0.1.0".
std::string version_line(std::string_view program);
// For programs whose command line is parsed by another library (Google Benchmark's):
// true, after printing version_line(program) to stdout, when an argument is --version.
bool print_version_if_asked(int argc, char** argv, std::string_view program);

}  // namespace strata
