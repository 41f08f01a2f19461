#include "strata/core/device.h"

#include "strata/core/error.h"

namespace strata {

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string n = s.substr(5);
    STRATA_CHECK(!n.empty() && n.find_first_not_of("0123456789") == std::string::npos && n.size() < 5,
                 "parse_device: bad device index in '", s, "'");
    return Device::cuda(std::stoi(n));
  }
  STRATA_FAIL("parse_device: unknown device '", s, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace strata
