#pragma once
// Convolutions through cuDNN's graph (backend) API: one execution plan per shape
// key, built once and replayed with a fresh variant pack per call. cuDNN 9 runs the
// legacy cudnnConvolution* entry points through the same engines but rebuilds much
// of that state on every call, which costs ~85 µs of host time per convolution on an
// H100 host (docs/results/gpu_resnet50.md); a cached plan costs a few µs.
// Internal to backends/cuda.
#include <string>

#include "strata/backends/cuda/context.h"
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

enum class ConvDir { fwd, bwd_data, bwd_weight };

// conv2d's bias and inference epilogue inside the forward graph (op_args.h):
// y = relu?(conv(x, w) + bias + z), each of bias (a [K] vector), z and relu optional.
struct GraphEpilogue {
  ops::TensorView bias, z;
  bool relu = false;
};

// x, w, y are the convolution's input, filter and output in the forward sense (for
// bwd_data x is dx and the output; for bwd_weight w is dw and the output), all dense
// in layout `l`. Returns "" when the convolution was enqueued, otherwise why no
// execution plan qualifies under `s` (the caller then uses the legacy API).
// With `epilogue` (forward only) the plan is one cuDNN graph conv -> add z -> add bias ->
// ReLU, intermediates in f32 and only y written; it qualifies under the same engine
// policy, so where only runtime-compiled fusion engines take it the caller runs the
// convolution alone and then the epilogue (conv_epilogue). The graph rather than
// cudnnConvolutionBiasActivationForward: that is the legacy API whose per-call host cost
// the graph plans avoid (above), it always takes a bias, and it runs with a restricted
// set of algorithms (github.com/danpovey/kaldi/pull/54: "only the precomputed implicit
// GEMM implementation").
// The graph API's convolution descriptor of p (cross-correlation, f32 accumulation, 2-D), finalized:
// what every convolution graph here, and the probes of bench/, build their operation on.
GraphDesc conv_descriptor(const ops::Conv2dParams& p);

std::string graph_conv(Context& ctx, ConvDir dir, const ops::TensorView& x, const ops::TensorView& w, const ops::TensorView& y,
                       Layout l, const ops::Conv2dParams& p, const Settings& s,
                       const GraphEpilogue* epilogue = nullptr);

}  // namespace strata::backends::cuda
