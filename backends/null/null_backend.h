#pragma once
// The null backend accepts every op and computes nothing: outputs are allocated by
// the front end and never written. Running a model on it measures strata's own
// per-call cost (checks, allocation, tape, dispatch) apart from any library's,
// as tinygrad's null device does. The bodies are inline so static dispatch can
// compile them away entirely.
#include "strata/backends/api/backend.h"

namespace strata::backends {

class NullBackend {
 public:
  static constexpr std::string_view kName = "null";
  static constexpr DeviceType kDevice = DeviceType::cpu;
  const Capabilities& capabilities() const {
    static constexpr Capabilities kEverything = [] {
      Capabilities c;
      c.all(kAnyDType);
      return c;
    }();
    return kEverything;
  }
  void synchronize() {}
#define STRATA_OP(name, Args, kind) \
  void name(const ops::Args&) {}
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

}  // namespace strata::backends
