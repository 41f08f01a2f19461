#pragma once
// Shape rules: validate an op's arguments and compute its output sizes. Used by the
// front end before every call and by direct-mode plans once, at plan time.
#include "core/tensor.h"
#include "ops/table/op_args.h"

namespace strata::ops {

Shape conv2d_out_shape(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
// Channel count C of a batch-norm input [N,C] or [N,C,H,W], after checking the
// parameter vectors against it.
int64_t batch_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var);
Shape pool2d_out_shape(std::string_view op, const Tensor& x, const Pool2dParams& p);
Shape global_avg_pool_out_shape(const Tensor& x);
Shape linear_out_shape(const Tensor& x, const Tensor& w, const Tensor& b);
// logits_name: what messages call the first argument ("probs" for the backward).
void check_softmax_xent(const Tensor& logits, const Tensor& labels, std::string_view logits_name = "logits");
void check_bce_logits(const Tensor& logits, const Tensor& targets);

}  // namespace strata::ops
