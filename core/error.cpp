#include "strata/core/error.h"

namespace strata::detail {
// Out of line so the throw path stays out of every caller's hot code.
void throw_error(std::string msg) { throw Error(std::move(msg)); }
}  // namespace strata::detail
