#pragma once
// The bracket a backend's call observer (backends/<backend>/call_observer.h) gets around the parts
// of a call the backend composed of its own ops (linear_epilogue.h), which the op trace lists as the
// one call: on_composed(op, true) before them and on_composed(op, false) after, for the observer
// that watched when the call began (none: nothing).
#include "strata/ops/table/op_id.h"

namespace strata::backends {

template <class Observer>
class ComposedScope {
 public:
  ComposedScope(ops::OpId op, Observer* o) : op_(op), o_(o) {
    if (o_) [[unlikely]]
      o_->on_composed(op_, true);
  }
  ~ComposedScope() {
    if (o_) [[unlikely]]
      o_->on_composed(op_, false);
  }
  ComposedScope(const ComposedScope&) = delete;
  ComposedScope& operator=(const ComposedScope&) = delete;

 private:
  ops::OpId op_;
  Observer* o_;
};

}  // namespace strata::backends
