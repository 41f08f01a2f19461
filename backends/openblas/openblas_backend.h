#pragma once
// The openblas backend: convolution as im2col (or a direct 1x1 path) + GEMM and
// linear as GEMM through OpenBLAS's cblas_?gemm; batch norm, pooling, element-wise
// ops, losses, reductions and optimizer steps as plain vectorisable loops. f32 and
// f64 (dgemm) throughout; inputs of any strides (non-contiguous ones are packed to
// contiguous NCHW first, outputs are written back to their own strides).
//
// Not thread-safe: one object holds its im2col workspaces; give each thread its own.
// OpenBLAS runs its own thread pool inside each GEMM (OPENBLAS_NUM_THREADS; see
// describe()); im2col splits over OpenMP threads (OMP_NUM_THREADS); the other loops
// run on the calling thread (docs/threads.md).
#include <string>

#include "strata/backends/api/backend.h"
#include "strata/backends/cpu/strided.h"

namespace strata::backends {

class OpenBlasBackend {
 public:
  static constexpr std::string_view kName = "openblas";
  static constexpr DeviceType kDevice = DeviceType::cpu;
  OpenBlasBackend();
  const Capabilities& capabilities() const;  // the table in register.cpp
  void synchronize() {}
  // "OpenBLAS 0.3.21 core=Prescott threads=2 ...": the kernel OpenBLAS picked for
  // this CPU, which decides its speed (Debian's build picks generic kernels on CPUs
  // it does not know). Benchmarks and tests print it.
  static std::string describe();

#define STRATA_OP(name, Args, kind) void name(const ops::Args& args);
#include "strata/ops/table/op_table.def"
#undef STRATA_OP

 private:
  loops::Scratch col_;  // im2col / col2im columns, grown on demand
  loops::Scratch mat_;  // a chunk of images' GEMM output or gathered dy
};

}  // namespace strata::backends
