#pragma once
// A decoding step's attention: a few queries per head over a cache (attention_decode.cu), and a
// step's new keys and values written into the cache (AttentionFwdArgs::k_new, v_new, positions).
// Internal to backends/cuda.
#include "strata/backends/cuda/context.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::cuda {

// The decoding kernel, the step's new rows included, where the call fits it (f32/f16/bf16, up to
// four queries per head on fewer rows than SMs, cache rows of whole 16-byte vectors); false: not
// run, the other paths' call.
bool attention_decode(Context& ctx, const ops::AttentionFwdArgs& a);
// The step's new rows into the cache, before another path attends over it.
void attention_append(Context& ctx, const ops::AttentionFwdArgs& a);

}  // namespace strata::backends::cuda
