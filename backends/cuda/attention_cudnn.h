#pragma once
// Scaled dot-product attention through cuDNN's fused flash-attention engines (Dao,
// "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
// 2023), built with the graph (backend) API: one execution plan per shape-and-strides key,
// replayed with a fresh variant pack per call, as graph_conv does for convolutions.
// Internal to backends/cuda.
#include <string>

#include "strata/backends/cuda/context.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

// Each returns "" when the fused attention was enqueued on ctx.stream, otherwise why not
// (an operand the engines do not take: f32/f64, kv_len, a causal mask with Tq != Tk, a head
// dim that is not a multiple of 8 or above 128; or cuDNN refusing the graph). Never throws
// for a refusal; the caller then runs strata's own kernels. A refused key is remembered,
// so the graph is built once per key, whatever the answer.
// With s.deterministic the backward graph writes dq straight from its matmul (cuDNN's
// deterministic form); otherwise through an f32 accumulator that the engine adds into
// atomically, which is faster and is the frontend's default.
std::string cudnn_attention_fwd(Context& ctx, const ops::AttentionFwdArgs& a, const Settings& s);
std::string cudnn_attention_bwd(Context& ctx, const ops::AttentionBwdArgs& a, const Settings& s);

}  // namespace strata::backends::cuda
