#pragma once
// Internal to nn/ (model.cpp, summary.cpp): whether a network's inputs are token ids rather
// than values. A network whose first layer (its first module without children, in registration
// order, which is the order strata's layers call them) is an Embedding looks its input up: GPT,
// or a user's Sequential that starts with one. Its input buffer and the input describe(true)
// runs it on are then i64, as the ids the Model passes on unconverted; any other network's are
// in the compute dtype.
#include "strata/nn/module.h"

namespace strata::nn::detail {

inline const Module* first_layer(const Module& m) {
  if (m.children().empty()) return &m;
  return first_layer(*m.children().front().second);
}

inline bool takes_token_ids(const Module& net) { return first_layer(net)->type_name() == "Embedding"; }

}  // namespace strata::nn::detail
