#pragma once
// One error type for all of strata. Messages name the op, the argument and the
// offending shapes/dtypes/devices; user input never aborts the process.
#include <sstream>
#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}
[[noreturn]] void throw_error(std::string msg);
}  // namespace detail

}  // namespace strata

// STRATA_CHECK(cond, "conv2d: input has ", c, " channels ...") throws strata::Error.
#define STRATA_CHECK(cond, ...)                                          \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::strata::detail::throw_error(::strata::detail::concat(__VA_ARGS__)); \
  } while (0)

#define STRATA_FAIL(...) ::strata::detail::throw_error(::strata::detail::concat(__VA_ARGS__))
