#pragma once
// Checkpoints: one safetensors file (nn/safetensors.h), written atomically.
//  - The model's state dict under its own names (torchvision's for ResNet), so the
//    file loads into PyTorch with safetensors.torch.load_file + load_state_dict
//    (pass strict=False, or drop the "optimizer." keys, for a resume checkpoint).
//  - Optionally the optimizer state under "optimizer.<param>.<slot>".
//  - Metadata: "format": "pt" (what PyTorch's writer puts there), "strata.step",
//    "strata.optimizer_steps", "strata.optimizer_lr", plus any caller entries.
// Loading validates the file (safetensors::parse), then the names and shapes against
// the model (and optimizer) before writing any tensor; errors name the file.
#include <cstdint>
#include <string>

#include "nn/module.h"
#include "nn/optim.h"
#include "nn/safetensors.h"

namespace strata::nn {

inline constexpr std::string_view kOptimizerPrefix = "optimizer.";

struct CheckpointInfo {
  int64_t step = 0;  // the trainer's step counter at save time
  safetensors::Metadata metadata;
};

void save_checkpoint(const std::string& path, const Module& model, const Optimizer* optimizer, int64_t step,
                     const safetensors::Metadata& extra = {});
// Loads into `model` (strict) and, when given, `optimizer` (its state must be in the
// file). Returns the step and metadata.
CheckpointInfo load_checkpoint(const std::string& path, Module& model, Optimizer* optimizer = nullptr);

}  // namespace strata::nn
