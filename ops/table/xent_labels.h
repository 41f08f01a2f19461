#pragma once
// The labels of softmax cross-entropy (op_args.h, SoftmaxXentFwdArgs): each one a class in
// [0, C) or ignore_index. One rule and one message for every backend: the CPU backends check
// each label as they read it, the cuda backend on the device (the first bad position, raised at
// the host's next look: cuda/index_errors.h), so a bad label reads the same whichever backend met it.
#include <cstdint>
#include <string_view>

#include "strata/core/error.h"
#include "strata/ops/table/op_args.h"

namespace strata::ops {

// codegen:begin cuda_train_ops
STRATA_HOST_DEVICE inline bool xent_label_valid(int64_t label, int64_t classes, int64_t ignore_index) {
  return label == ignore_index || (label >= 0 && label < classes);
}
// codegen:end

[[noreturn]] inline void fail_xent_label(std::string_view op, int64_t pos, int64_t label, int64_t classes,
                                         int64_t ignore_index) {
  STRATA_FAIL(op, ": argument 'labels': labels[", pos, "] = ", label, " is outside [0, ", classes,
              ") for logits with ", classes, " classes and is not ignore_index (", ignore_index, ")");
}

}  // namespace strata::ops
