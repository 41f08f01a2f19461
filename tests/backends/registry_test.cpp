// The registry creates a backend when it is first asked for, once; listing creates nothing, so a
// program that never uses a GPU never initialises one or maps the CUDA libraries.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "strata/backends/api/registry.h"
#include "strata/backends/null/null_backend.h"

namespace strata::backends {
namespace {

int made = 0;
BackendFactoryResult make_counted() {
  ++made;
  return {std::make_unique<BackendAdapter<NullBackend>>(), {}};
}
BackendFactoryResult make_missing() {
  ++made;
  return {nullptr, "no such device here"};
}

TEST(Registry, CreatesEachBackendOnceWhenFirstAskedFor) {
  made = 0;
  Registry r;
  r.add_factory("null", DeviceType::cpu, &make_counted);
  r.add_factory("gone", DeviceType::cuda, &make_missing);
  EXPECT_EQ(r.describe(), "not initialised yet: null, gone");
  EXPECT_EQ(made, 0);
  EXPECT_TRUE(r.for_device(DeviceType::cpu).size() == 1);
  EXPECT_EQ(made, 1);  // only the cpu one
  EXPECT_EQ(&r.get("null"), r.find("null"));
  EXPECT_EQ(made, 1);
  EXPECT_EQ(r.find("gone"), nullptr);
  EXPECT_EQ(r.find("gone"), nullptr);
  EXPECT_EQ(made, 2);  // an unavailable backend is tried once
  EXPECT_EQ(r.describe(), "null; unavailable: gone (no such device here)");
  try {
    r.get("gone");
    FAIL() << "get of an unavailable backend must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backend 'gone' is built but unavailable: no such device here"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(r.add_factory("null", DeviceType::cpu, &make_counted), Error);
}

std::string mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream s;
  s << maps.rdbuf();
  return s.str();
}

// Run in a process of its own (ctest runs each test alone), so nothing else has touched a backend.
TEST(Registry, ListingBackendsMapsNoCudaLibrary) {
  const std::string listed = registry().describe();
  EXPECT_NE(listed.find("not initialised yet"), std::string::npos) << listed;
  const std::string maps = mapped_files();
  for (const char* lib : {"libcudnn", "libcublas", "libcudart.so", "libcuda.so"})
    EXPECT_EQ(maps.find(lib), std::string::npos) << lib << " is mapped by a program that only listed backends";
  registry().get("reference");  // a CPU backend in use maps none either
  const std::string after = mapped_files();
  for (const char* lib : {"libcudnn", "libcublas", "libcudart.so", "libcuda.so"})
    EXPECT_EQ(after.find(lib), std::string::npos) << lib << " is mapped by a program that used a CPU backend";
}

}  // namespace
}  // namespace strata::backends
