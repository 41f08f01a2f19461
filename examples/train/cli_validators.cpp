#include "examples/train/cli_validators.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace strata::train {

CLI::Validator finite_in(double lo, double hi, bool lo_open) {
  char range[96];
  std::snprintf(range, sizeof range, "%c%g, %g]", lo_open ? '(' : '[', lo, hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
        if (!std::isfinite(v)) return "'" + text + "' is not a finite number (expected one in " + range + ")";
        if (v < lo || v > hi || (lo_open && v == lo)) return "'" + text + "' is outside " + range;
        return {};
      },
      std::string("NUMBER in ") + range);
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        if (digits) std::strtoull(text.c_str(), nullptr, 10);
        if (!digits || errno == ERANGE) return "'" + text + "' is not an integer in [0, 18446744073709551615]";
        return {};
      },
      "UINT64");
}


}  // namespace strata::train
