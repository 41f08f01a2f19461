#pragma once
// Test coverage of the op table. A test file registers what it checks with
// STRATA_COVERS(op, "gradcheck") at namespace scope; the coverage test in the same
// executable fails for any op of op_table.def without a registered check.
#include <map>
#include <set>
#include <string>

#include "strata/ops/table/op_id.h"

namespace strata::testing {

std::map<ops::OpId, std::set<std::string>>& op_coverage();
int register_coverage(ops::OpId op, const char* kind);

}  // namespace strata::testing

#define STRATA_COVERS_CAT2(a, b) a##b
#define STRATA_COVERS_CAT(a, b) STRATA_COVERS_CAT2(a, b)
#define STRATA_COVERS(op, kind)                                                \
  [[maybe_unused]] static const int STRATA_COVERS_CAT(strata_covers_, __LINE__) = \
      ::strata::testing::register_coverage(::strata::ops::OpId::op, kind)
