#pragma once
// The onednn backend: oneDNN primitives for convolution, batch norm, ReLU, pooling,
// matmul (linear), binary add, eltwise linear (scale), softmax and reductions; own
// loops (backends/cpu) for the ops oneDNN has no primitive for (losses
// past the softmax, dropout, axpy, argmax, fill, copy, optimizer steps).
//
// Each primitive is planned once per (op, dtype, sizes, strides, attributes) and
// cached with its memory objects and any reorders to the layouts it prefers
// (format_tag::any), so a repeated call only rebinds pointers and executes. Memory
// descriptors carry strata's own strides: NCHW, NHWC and other views run without
// a copy unless the primitive asks for a blocked layout.
//
// f32 everywhere; f64 only for the loop-based ops; bf16 for conv2d, linear, relu, add
// and pooling where the CPU runs bf16 natively (AVX512_BF16 or AMX; elsewhere its table
// lacks bf16 and a bf16 call is an error naming the op and dtype). One
// engine and one in-order stream per object; not thread-safe (one per thread). Work
// runs on oneDNN's OpenMP pool (OMP_NUM_THREADS; docs/threads.md).
// oneDNN/DNNL headers stay out of this header: the state lives behind a pointer.
#include <cstddef>
#include <memory>
#include <string>

#include "strata/backends/api/backend.h"

namespace strata::backends {

namespace onednn {
struct Context;
}

class OneDnnBackend {
 public:
  static constexpr std::string_view kName = "onednn";
  static constexpr DeviceType kDevice = DeviceType::cpu;
  OneDnnBackend();
  ~OneDnnBackend();
  OneDnnBackend(OneDnnBackend&&) noexcept;
  OneDnnBackend& operator=(OneDnnBackend&&) noexcept;

  const Capabilities& capabilities() const;  // the table in register.cpp
  void synchronize();
  // "oneDNN 2.6.3 (cpu runtime OpenMP, isa avx512_core_bf16, bf16 native), 12 cached plans"
  std::string describe() const;
  size_t cached_plans() const;

#define STRATA_OP(name, Args, kind) void name(const ops::Args& args);
#include "strata/ops/table/op_table.def"
#undef STRATA_OP

 private:
  void plain_batch_norm_fwd(const ops::BatchNormFwdArgs& a);  // batch_norm_fwd without its fused epilogue
  void plain_batch_norm_bwd(const ops::BatchNormBwdArgs& a);  // batch_norm_bwd without a fused forward's mask

  std::unique_ptr<onednn::Context> ctx_;
  Capabilities capabilities_;  // bf16 only where the CPU runs it natively
};

}  // namespace strata::backends
