#pragma once
// strata's own batch norm kernels (batch_norm_own.cu runs their passes, declared in
// batch_norm_passes.cuh), beside cuDNN's in batch_norm.cu. Internal to backends/cuda.
#include "strata/backends/cuda/context.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

// Whether x's batch norm runs on strata's kernels: every f16/bf16 one; f32 in
// channels-last unless Settings::cudnn_nhwc_batch_norm, in NCHW if own_nchw_batch_norm.
bool own_batch_norm(const ops::TensorView& x, const Settings& s);
// f32/f16/bf16 activations; parameters, running and saved statistics f32. Both run the
// fusions of op_args.h (residual add, ReLU, its mask) in either mode.
void batch_norm_fwd_own(Context& ctx, const ops::BatchNormFwdArgs& a);
void batch_norm_bwd_own(Context& ctx, const ops::BatchNormBwdArgs& a);

// batch_norm_epilogue.cu: the forward's fusions as a pass over y in place (z and the mask
// undefined when absent; y and z dense in x's memory order); and a backward's masked dy,
// into a.dz, else a.dx (cuDNN's backward in place), else a temporary returned, with
// `plain` the arguments to run cuDNN's backward on.
void batch_norm_epilogue(Context& ctx, const ops::TensorView& y, const ops::TensorView& z,
                         const ops::TensorView& mask, bool relu);
DeviceBuffer masked_grad(Context& ctx, const ops::BatchNormBwdArgs& a, ops::BatchNormBwdArgs& plain);

}  // namespace strata::backends::cuda
