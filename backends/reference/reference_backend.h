#pragma once
// The reference backend: plain loops, written for clarity, accumulating in double.
// It is the oracle every other backend is tested against. Floating ops run in f32
// and f64; every input may have any strides (NCHW, NHWC, views).
#include "strata/backends/api/backend.h"

namespace strata::backends {

class ReferenceBackend {
 public:
  static constexpr std::string_view kName = "reference";
  static constexpr DeviceType kDevice = DeviceType::cpu;
  const Capabilities& capabilities() const;  // the table in register.cpp
  void synchronize() {}
#define STRATA_OP(name, Args, kind) void name(const ops::Args& args);
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

}  // namespace strata::backends
