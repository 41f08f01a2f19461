#include "support/coverage.h"

namespace strata::testing {

std::map<ops::OpId, std::set<std::string>>& op_coverage() {
  static std::map<ops::OpId, std::set<std::string>> m;
  return m;
}

int register_coverage(ops::OpId op, const char* kind) {
  op_coverage()[op].insert(kind);
  return 0;
}

}  // namespace strata::testing
