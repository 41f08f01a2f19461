#pragma once
// Text generation with nn::Gpt: each new token drawn from the model's logits at the last
// position, greedy or sampled (temperature, top-k), from a seeded generator. While prompt and new
// tokens fit block_size, a key/value cache (nn::KvCache) makes each step run the newest token
// alone; a longer generation slides a window of block_size tokens and runs it whole each step.
//
// Direct mode decodes over a static cache always (its steps are planned once per length: the
// prompt's, then the one-token step, each bound to the cache), so prompt and new tokens must fit
// block_size there.
//
// graph: the decoding step of a static cache captured once as a CUDA graph (static or direct
// mode on the cuda backend) and replayed for every token, so a token costs one graph launch and the
// copies of its token in and out instead of a host call per op. Greedy decoding picks the
// token inside the graph (argmax) and feeds it to the next launch; sampling reads the logits.
// The first decoding step runs uncaptured (it warms up what the libraries make lazily).
#include <cstdint>

#include "strata/nn/layers/transformer.h"

namespace strata::nn {

struct GenerateOptions {
  int64_t new_tokens = 32;
  double temperature = 1.0;  // 0: greedy (the first largest logit)
  int64_t top_k = 0;         // sample among the k largest logits; 0: among all
  uint64_t seed = 0;         // the draws' generator (strata's Generator)
  bool static_cache = false; // a preallocated cache (KvCache's static form) instead of a growing one
  bool graph = false;        // replay a captured decoding step (implies static_cache; see above)
};

// prompt i64 [B, T0] (T0 >= 1) -> [B, T0 + new_tokens] on the host, the prompt first.
template <class P>
Tensor generate(Gpt<P>& m, const Tensor& prompt, const GenerateOptions& o = {});

}  // namespace strata::nn
