#pragma once
// The onednn emitter (codegen/emitter.h): a model's prediction as oneDNN primitives made
// once at load and run in order, each configured as strata's onednn backend configures
// it (backends/onednn/descriptor_rules.h gives both the descriptors and the convolution's
// form), so the results are bitwise those of direct mode on onednn; and a training step
// (LeNet-5's) likewise, with its backward primitives, strata's own plain loops and its state.
#include <memory>

#include "strata/codegen/emitter.h"

namespace strata::codegen::onednn {

std::unique_ptr<Emitter> make_onednn_emitter();

}  // namespace strata::codegen::onednn
