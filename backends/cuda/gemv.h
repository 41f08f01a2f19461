#pragma once
// linear's forward for a few rows (a decoding step's one token, batch-1 inference's last
// layer): y[m, :] = x[m, :] w^T + b read at the weights' bandwidth, one warp per output
// column. cuBLAS runs such products as a GEMM split over K plus a reduction kernel, two
// launches of a few microseconds where the weights take one to read (GPT-2 small's
// decoding step: 48 of them, docs/results/gpt2_vs_pytorch.md). Internal to backends/cuda.
#include "strata/backends/cuda/context.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

// Up to this many rows take the kernel below; more are a GEMM's work.
constexpr int64_t kGemvMaxRows = 4;

// Whether gemv_rows runs this call: f32, f16 or bf16, at most kGemvMaxRows rows, the rows of x
// and w contiguous (stride 1 along K), K > 0 (a residual z of any strides is added; an activation
// is the caller's; a layer-norm prologue's weight and bias dense).
bool gemv_fits(const ops::LinearFwdArgs& a);
// y = x w^T (+ b) (+ z), or with act (GELU's tanh form only) pre = x w^T (+ b) and y = GELU of pre's
// rounded value, bitwise the product followed by the unary op: each output the sum over K in a fixed
// order (lanes, then a butterfly), in f32 (f32 without TF32 rounding), so every call of a shape gives
// the same bits. With norm_eps, x's rows are layer-normalised as they are read, bitwise what
// layer_norm_fwd writes for so few rows (its warp-per-row order).
void gemv_rows(Context& ctx, const ops::LinearFwdArgs& a);

}  // namespace strata::backends::cuda
