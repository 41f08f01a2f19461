#pragma once
// The cuda emitter's training step (internal to codegen/cuda): each recorded call's text, and the
// scratch the program keeps for what strata's backend allocates inside a call (a loss's per-row
// terms, the partial sums of a bias gradient): one buffer, a place per call, made at load.
#include <cstdint>
#include <string>

#include "strata/codegen/cuda/call_text.h"

namespace strata::codegen::cuda {

class TrainScratch {
 public:
  // "scratch + <offset>" for n bytes (256-byte aligned), or as a double* of n doubles.
  std::string bytes(int64_t n);
  std::string doubles(int64_t n);
  int64_t total() const { return bytes_; }

 private:
  int64_t bytes_ = 0;
};

// A training step's call (a forward one as forward_text writes it). `counter`: the int64_t*
// expression of a dropout call's {seed, offset} in the state. Throws naming the op, argument or
// library choice the emitter does not write out.
CallText train_text(const RecordedCall& c, const std::string& member, Places& p, TrainScratch& scratch,
                    const std::string& counter);

}  // namespace strata::codegen::cuda
