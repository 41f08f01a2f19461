// The registry creates a backend when it is first asked for, once; listing creates nothing, so a
// program that never uses a GPU never initialises one or maps the CUDA libraries; saying which backends
// can run here asks each one's probe once and creates none.
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
  EXPECT_EQ(r.describe(), "built: null, gone");
  EXPECT_EQ(made, 0);
  EXPECT_TRUE(r.for_device(DeviceType::cpu).size() == 1);
  EXPECT_EQ(made, 1);  // only the cpu one
  EXPECT_EQ(&r.get("null"), r.find("null"));
  EXPECT_EQ(made, 1);
  EXPECT_EQ(r.find("gone"), nullptr);
  EXPECT_EQ(r.find("gone"), nullptr);
  EXPECT_EQ(made, 2);  // an unavailable backend is tried once
  EXPECT_EQ(r.describe(), "built: null, gone; unavailable here: gone (no such device here)");
  try {
    r.get("gone");
    FAIL() << "get of an unavailable backend must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backend 'gone' is built but unavailable: no such device here"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(r.add_factory("null", DeviceType::cpu, &make_counted), Error);
}

int probes = 0;
std::string probe_absent() {
  ++probes;
  return "no device of that kind";
}
std::string probe_present() {
  ++probes;
  return "";
}

TEST(Registry, SaysWhichBackendsAreUsableWithoutCreatingAny) {
  made = 0;
  probes = 0;
  Registry r;
  r.add_factory("cpu", DeviceType::cpu, &make_counted);
  r.add_factory("gpu", DeviceType::cuda, &make_counted, &probe_absent);
  EXPECT_EQ(r.describe_usable(), "built: cpu, gpu; usable here: cpu; unavailable here: gpu (no device of that kind)");
  EXPECT_EQ(r.describe_usable(), r.describe_usable());
  EXPECT_EQ(made, 0);
  EXPECT_EQ(probes, 1);  // asked once
  EXPECT_EQ(r.describe(), "built: cpu, gpu");  // describe() probes nothing
  r.add_factory("gone", DeviceType::cuda, &make_missing, &probe_present);
  EXPECT_NE(r.describe_usable().find("usable here: cpu, gone;"), std::string::npos) << r.describe_usable();
  EXPECT_EQ(r.find("gone"), nullptr);  // the factory's answer overrides the probe's
  EXPECT_EQ(r.describe_usable(),
            "built: cpu, gpu, gone; usable here: cpu; unavailable here: gpu (no device of that kind), gone (no such "
            "device here)");
  Registry all;
  all.add_factory("cpu", DeviceType::cpu, &make_counted);
  all.add_factory("gpu", DeviceType::cuda, &make_counted, &probe_present);
  EXPECT_EQ(all.describe_usable(), "built: cpu, gpu; usable here: cpu, gpu");
  try {
    r.get("tpu");
    FAIL() << "get of an unknown backend must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backend 'tpu' is not built into this strata; built: cpu, gpu, gone; usable "
                                         "here: cpu; unavailable here: gpu (no device of that kind)"),
              std::string::npos) << e.what();
  }
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
  EXPECT_EQ(listed.rfind("built: reference", 0), 0u) << listed;
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
