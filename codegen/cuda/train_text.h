#pragma once
// The cuda emitter's training step (internal to codegen/cuda): each recorded call's text, and the
// scratch the program keeps for what strata's backend allocates inside a call (a loss's per-row
// terms, the partial sums of a bias gradient): one buffer, a place per call, made at load.
#include <cstdint>
#include <string>
#include <vector>

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

// A double as the program's literal of the same value ("%.17g").
std::string num(double v);
// "reinterpret_cast<uint8_t*>(<place>)" of a dense u8 mask (dropout's, a fused batch norm's ReLU's).
std::string mask_ptr(Places& p, const ops::TensorView& v, const std::string& what);

// Batch norm in training (batch_norm_text.cpp): cuDNN's forward and backward with strata's kernels
// for a fused forward's residual, ReLU and mask, as the backend ran them.
CallText batch_norm_fwd_text(const RecordedCall& c, const std::string& member, Places& p);
CallText batch_norm_bwd_text(const RecordedCall& c, const std::string& member, Places& p);

// A training step's call (a forward one as forward_text writes it). `counter`: the int64_t*
// expression of a dropout call's {seed, offset} in the state. Throws naming the op, argument or
// library choice the emitter does not write out.
CallText train_text(const RecordedCall& c, const std::string& member, Places& p, TrainScratch& scratch,
                    const std::string& counter);
// Consecutive SGD steps (sgd_step calls, the parameters' order kept) as one call of strata's
// multi-tensor launches, as graph and direct mode step a model's parameters (the same update of
// each element as the single step's kernel, so the same bits). Throws naming a step it does not
// write out (a schedule or loss scaling read from memory, an operand not dense f32).
// Whether two SGD steps' options are alike (one list takes one set).
bool same_sgd_options(const ops::SgdOptions& a, const ops::SgdOptions& b);
CallText sgd_list_text(const std::vector<const RecordedCall*>& steps, Places& p);

}  // namespace strata::codegen::cuda
