#pragma once
// The eigen backend: every op as Eigen Tensor-module expressions (TensorMap views of
// strata's memory), evaluated on an Eigen::ThreadPoolDevice, the way TensorFlow's CPU
// kernels ran for years. Convolution is a contraction of the image-patch matrix with
// the filters (Chellapilla, Puri & Simard, "High performance convolutional neural
// networks for document processing", 2006), built and contracted in L2-sized blocks;
// average pooling reduces image patches (extract_image_patches), max pooling loops over
// each window; linear is a contraction; batch norm, losses, reductions and optimizer
// steps are broadcasts and reductions.
//
// f32 and f64 for every op; fill and copy for any dtype. No bf16: Eigen 3.4's bf16
// contraction converts every multiply-add to f32 and rounds it back to bf16, so it
// accumulates in bf16 and runs slower than f32 (docs/results/cpu_eigen.md). Inputs of any strides that are slices or permutations
// of a dense tensor (NCHW, NHWC, channel slices, transposes); an overlapping or
// otherwise unrepresentable view is a strata::Error naming the op.
//
// Threads: one Eigen::ThreadPool per object, sized from OMP_NUM_THREADS like the
// other CPU backends (else one thread per CPU this process may run on);
// OMP_WAIT_POLICY=passive turns its spinning off (docs/threads.md). Results depend on
// the thread count only, never on timing. Not thread-safe: one object per thread.
// Eigen's headers stay out of this header: the state lives behind a pointer.
#include <memory>
#include <string>

#include "strata/backends/api/backend.h"

namespace strata::backends {

namespace eigen {
struct Context;
}

class EigenBackend {
 public:
  static constexpr std::string_view kName = "eigen";
  static constexpr DeviceType kDevice = DeviceType::cpu;
  EigenBackend();
  ~EigenBackend();
  EigenBackend(EigenBackend&&) noexcept;
  EigenBackend& operator=(EigenBackend&&) noexcept;

  const Capabilities& capabilities() const;  // the table in register.cpp
  void synchronize() {}
  // "Eigen 3.4.0 (SIMD: AVX512, FMA), ThreadPoolDevice threads=2 spinning=off"
  std::string describe() const;
  int threads() const;

#define STRATA_OP(name, Args, kind) void name(const ops::Args& args);
#include "strata/ops/table/op_table.def"
#undef STRATA_OP

 private:
  std::unique_ptr<eigen::Context> ctx_;
};

}  // namespace strata::backends
