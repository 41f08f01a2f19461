#pragma once
// Internal to the trainer (trainer.cpp, trainer_checkpoint.cpp): its dropout bookkeeping.
// Dropout keeps its mask position (seed, offset) outside the state dict
// (nn/layers/activation.h); the trainer seeds it and saves it for exact resume.
#include <cstdint>
#include <string>

#include "strata/data/random.h"
#include "strata/nn/layers/activation.h"
#include "strata/nn/model.h"

namespace strata::train {

// fn(name, DropoutDraws&) for every Dropout module of the model, whatever its dispatch mode.
template <class Fn>
void for_each_dropout(nn::Model& m, Fn&& fn) {
  for (auto& [name, mod] : m.module().named_modules())
    if (auto* d = dynamic_cast<nn::DropoutDraws*>(mod)) fn(name, *d);
}

inline uint64_t dropout_seed(uint64_t seed, int64_t index) {
  return data::mix_seed(seed, 0x64726f706f7574ULL /* "dropout" */, static_cast<uint64_t>(index));
}

}  // namespace strata::train
