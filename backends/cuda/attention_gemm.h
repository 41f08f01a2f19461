#pragma once
// Attention over long sequences as cuBLAS GEMMs around strata's softmax kernels: the
// scores of a batch entry's heads, S = q k^T, go through global memory ([heads, Tq, Tk]
// in f32), as in the "math" form of PyTorch's scaled_dot_product_attention, instead of one
// block per query re-reading every key (attention.cu's kernels, the form for
// decoding and short rows). The backward recomputes the probabilities from the forward's
// log-sum-exp, as the kernels do, so nothing of size T^2 outlives an op. Internal to
// backends/cuda.
#include "strata/backends/cuda/context.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

// True when the op ran here; false when the shape is left to strata's kernels (a cache
// length on the device, f64, rows shorter than a GEMM pays for, or a view cuBLAS cannot
// read in place).
bool gemm_attention_fwd(Context& ctx, const Settings& s, const ops::AttentionFwdArgs& a);
bool gemm_attention_bwd(Context& ctx, const Settings& s, const ops::AttentionBwdArgs& a);

}  // namespace strata::backends::cuda
