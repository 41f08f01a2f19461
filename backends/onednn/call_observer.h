#pragma once
// A read-only window on the onednn backend's calls, for a program that writes a planned
// step out as oneDNN code of its own (codegen/): the op members that report call the
// observer with their argument struct before they run, and each call that runs a oneDNN
// primitive (rather than one of strata's plain loops) says how much work it ran it with,
// the input of the thread-count rule (backends/cpu/threads.h). One observer per thread,
// none by default: a call pays a function call and a branch.
//
// Reporting ops: conv2d_fwd, linear_fwd, relu_fwd, max_pool2d_fwd, avg_pool2d_fwd,
// global_avg_pool_fwd, batch_norm_fwd, add, copy, and those of a training step:
// conv2d_bwd_data, conv2d_bwd_weight, conv2d_bwd_bias, linear_bwd_data, linear_bwd_weight,
// relu_bwd, max_pool2d_bwd, global_avg_pool_bwd, batch_norm_bwd, softmax_xent_fwd,
// softmax_xent_bwd, dropout_fwd, dropout_bwd, fill and sgd_step (once per parameter:
// multi_sgd_step reports the single steps it runs), and a GPT's: index_select,
// layer_norm_fwd, attention_fwd, unary_fwd, bmm and their training step's layer_norm_bwd,
// attention_bwd, unary_bwd, index_add and reduce_dims. An observer must treat any other op run
// while it watches as unseen (the op trace, ops/trace.h, lists every kernel of a step).
// A call the backend composes of its own ops (a linear with an epilogue or a layer-norm
// prologue, a linear's data gradient through its activation: backends/api/linear_epilogue.h) is bracketed by on_composed(op, true / false),
// its parts reported as the ops they are, where the trace lists the call once.
#include <cstdint>
#include <string>

#include "strata/backends/api/composed_call.h"
#include "strata/backends/cpu/threads.h"
#include "strata/ops/table/op_id.h"

namespace strata::backends::onednn {

class CallObserver {
 public:
  virtual ~CallObserver() = default;
  // Before op runs; `args` points at its argument struct (ops/table/op_args.h), valid
  // during the call only.
  virtual void on_call(ops::OpId op, const void* args) = 0;
  // The latest reported call runs a primitive with this work (threads_for's input).
  virtual void on_primitive(const loops::Work& work) = 0;
  // Around the parts of a call of `op` composed of the backend's own ops (begin true, then false).
  virtual void on_composed(ops::OpId /*op*/, bool /*begin*/) {}
};

// The observer of this thread's calls (null: none).
CallObserver* call_observer();
// Installs `o` on this thread for the guard's lifetime; the previous one is put back after.
class ScopedCallObserver {
 public:
  explicit ScopedCallObserver(CallObserver* o);
  ~ScopedCallObserver();
  ScopedCallObserver(const ScopedCallObserver&) = delete;
  ScopedCallObserver& operator=(const ScopedCallObserver&) = delete;

 private:
  CallObserver* saved_;
};

// "2.6.3": the oneDNN the backend runs on, which a program written against it names.
std::string library_version();

// Brackets a composed call's parts for this thread's observer, if any (on_composed).
class ComposedCall : public ComposedScope<CallObserver> {
 public:
  explicit ComposedCall(ops::OpId op) : ComposedScope(op, call_observer()) {}
};

template <class Args>
inline void observe_call(ops::OpId op, const Args& a) {
  if (CallObserver* o = call_observer()) [[unlikely]]
    o->on_call(op, &a);
}

}  // namespace strata::backends::onednn
