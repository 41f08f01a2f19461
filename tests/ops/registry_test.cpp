#include <gtest/gtest.h>

#include "backends/api/registry.h"
#include "ops/dispatch.h"
#include "support/expect_error.h"

namespace strata {
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

TEST(Dispatch, ParseMode) {
  EXPECT_EQ(ops::parse_dispatch_mode("static"), ops::DispatchMode::static_call);
  EXPECT_EQ(ops::dispatch_mode_name(ops::DispatchMode::direct), "direct");
  EXPECT_STRATA_ERROR(ops::parse_dispatch_mode("jit"), "'jit'", "virtual", "static", "direct");
}

}  // namespace
}  // namespace strata
