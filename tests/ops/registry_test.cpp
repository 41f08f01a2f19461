#include <gtest/gtest.h>

#include "strata/backends/api/registry.h"
#include "strata/ops/dispatch.h"
#include "support/expect_error.h"

namespace strata {
namespace backends {
BackendFactoryResult make_backend_reference();
BackendFactoryResult make_backend_null();
}  // namespace backends
namespace {

TEST(Registry, ReferenceAndNullAlwaysBuilt) {
  auto names = backends::registry().names();
  EXPECT_NE(std::find(names.begin(), names.end(), "reference"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "null"), names.end());
  EXPECT_EQ(backends::registry().get("reference").device_type(), DeviceType::cpu);
  EXPECT_FALSE(backends::registry().for_device(DeviceType::cpu).empty());
}

TEST(Registry, UnknownBackendListsTheBuiltOnes) {
  EXPECT_STRATA_ERROR(backends::registry().get("tpu"), "'tpu'", "not built", "reference", "null");
}

TEST(Registry, BestIsTheFastestAvailableAndNeverNull) {
  backends::Registry r;
  EXPECT_STRATA_ERROR(r.best(), "no backend", "cuda, onednn, openblas, eigen, reference");
  r.add(backends::make_backend_null().backend);
  EXPECT_STRATA_ERROR(r.best(), "no backend", "null");
  r.add(backends::make_backend_reference().backend);
  EXPECT_EQ(r.best(), "reference");
  EXPECT_EQ(r.best(DeviceType::cpu), "reference");
  EXPECT_STRATA_ERROR(r.best(DeviceType::cuda), "no backend for cuda");
  // This build: cuda when a GPU is there, else onednn, else openblas, else eigen.
  const auto& g = backends::registry();
  const std::string_view expect =
      g.find("cuda") ? "cuda"
                     : (g.find("onednn") ? "onednn"
                                         : (g.find("openblas") ? "openblas" : (g.find("eigen") ? "eigen" : "reference")));
  EXPECT_EQ(g.best(), expect);
  EXPECT_EQ(g.get(g.best(DeviceType::cpu)).device_type(), DeviceType::cpu);
}

TEST(Dispatch, ParseMode) {
  EXPECT_EQ(ops::parse_dispatch_mode("static"), ops::DispatchMode::static_call);
  EXPECT_EQ(ops::dispatch_mode_name(ops::DispatchMode::direct), "direct");
  EXPECT_STRATA_ERROR(ops::parse_dispatch_mode("jit"), "'jit'", "virtual", "static", "direct");
}

}  // namespace
}  // namespace strata
