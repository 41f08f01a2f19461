#pragma once
// What the cuda emitter's tests (prediction and training step) share: a generated file by name,
// and a project written to a temporary folder and built with the CUDA toolkit and cuDNN (no GPU
// needed), the folder kept when STRATA_KEEP_GENERATED is set.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "strata/codegen/emitter.h"

namespace strata::testing {

inline std::string file(const std::vector<codegen::GeneratedFile>& files, const std::string& name) {
  for (const auto& f : files)
    if (f.name == name) return f.text;
  ADD_FAILURE() << "no " << name << " among the generated files";
  return {};
}

#ifdef STRATA_TEST_CUDA_BUILD
// Writes `files` into a folder of its own (`tag` and the process id), configures and builds it,
// and expects `program` among the build's outputs.
inline void expect_project_builds(const std::vector<codegen::GeneratedFile>& files, const std::string& tag,
                                  const std::string& program) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / (tag + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& f : files) {
    std::ofstream out(dir / f.name, std::ios::binary);
    out << f.text;
  }
  const std::string log = (dir / "log.txt").string();
  const std::string configure = std::string("\"") + STRATA_TEST_CMAKE + "\" -S " + dir.string() + " -B " +
                                (dir / "build").string() + " -DCMAKE_CUDA_COMPILER=" + STRATA_TEST_NVCC +
                                " -DCMAKE_CUDA_ARCHITECTURES=90 -DCUDNN_ROOT=" + STRATA_TEST_CUDNN_ROOT + " > " + log +
                                " 2>&1";
  ASSERT_EQ(std::system(configure.c_str()), 0) << "see " << log;
  const std::string build = std::string("\"") + STRATA_TEST_CMAKE + "\" --build " + (dir / "build").string() +
                            " >> " + log + " 2>&1";
  ASSERT_EQ(std::system(build.c_str()), 0) << "see " << log;
  EXPECT_TRUE(fs::exists(dir / "build" / program));
  if (!std::getenv("STRATA_KEEP_GENERATED")) fs::remove_all(dir);  // kept on request, to read it
}
#endif

}  // namespace strata::testing
