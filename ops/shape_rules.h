#pragma once
// Shape rules: validate an op's arguments and compute its output sizes. Used by the
// front end before every call and by direct-mode plans once, at plan time.
#include "strata/core/tensor.h"
#include "strata/ops/table/op_args.h"

namespace strata::ops {

Shape conv2d_out_shape(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
// Channel count C of a batch-norm input [N,C] or [N,C,H,W], after checking the
// parameter vectors against it.
// The dtype of batch norm's parameters, running and saved statistics for input x:
// x's own, except f32 for f16/bf16 input (mixed precision keeps statistics in f32).
DType batch_norm_param_dtype(const Tensor& x);
// A [C] parameter of batch norm for input x: size and dtype checked.
void check_batch_norm_param(std::string_view op, std::string_view arg, const Tensor& t, const Tensor& x);
int64_t batch_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var);
Shape pool2d_out_shape(std::string_view op, const Tensor& x, const Pool2dParams& p);
Shape global_avg_pool_out_shape(const Tensor& x);
// space_to_depth's parameters with their defaults resolved against input x (op_args.h);
// the output is [N, channels, out_h, out_w].
SpaceToDepthParams space_to_depth_params(std::string_view op, const Tensor& x, const SpaceToDepthParams& p);
inline Shape space_to_depth_out_shape(const Tensor& x, const SpaceToDepthParams& resolved) {
  return Shape{x.size(0), resolved.channels, resolved.out_h, resolved.out_w};
}
Shape linear_out_shape(const Tensor& x, const Tensor& w, const Tensor& b);
void check_softmax_xent(const Tensor& logits, const Tensor& labels);
void check_bce_logits(const Tensor& logits, const Tensor& targets);

}  // namespace strata::ops
