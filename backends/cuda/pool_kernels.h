#pragma once
// strata's own pooling kernels (pool_kernels.cu), beside cuDNN's in pool.cpp. Internal to
// backends/cuda.
#include "strata/backends/cuda/context.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

// Max pooling's backward when x, dy and dx are dense channels-last f32/f16/bf16 with C a
// multiple of a 16-byte vector and 16-byte aligned data; false (nothing run) otherwise.
bool max_pool2d_bwd_channels_last(Context& ctx, const ops::MaxPool2dBwdArgs& a);

}  // namespace strata::backends::cuda
