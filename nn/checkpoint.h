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
//
// Non-finite values: a NaN or an infinity in a parameter, buffer or optimizer slot
// means a diverged run. Saving one is refused (the previous checkpoint at the path
// stays as it was); loading one is refused naming the file and the tensors, unless
// LoadOptions::allow_non_finite, which loads it and returns the same words as
// warnings. The refusal names how to ask for that (LoadOptions::allow_with: a
// program's option, "--allow-non-finite").
#include <cstdint>
#include <string>
#include <vector>

#include "strata/nn/module.h"
#include "strata/nn/optim.h"
#include "strata/nn/safetensors.h"

namespace strata::nn {

inline constexpr std::string_view kOptimizerPrefix = "optimizer.";

struct CheckpointInfo {
  int64_t step = 0;  // the trainer's step counter at save time
  safetensors::Metadata metadata;
  std::vector<std::string> warnings;  // non-finite tensors loaded with allow_non_finite
};

struct LoadOptions {
  bool allow_non_finite = false;
  // What sets allow_non_finite, for the refusal's message: a command-line option in a program.
  std::string allow_with = "nn::LoadOptions::allow_non_finite";
};

void save_checkpoint(const std::string& path, const Module& model, const Optimizer* optimizer, int64_t step,
                     const safetensors::Metadata& extra = {});
// Loads into `model` (strict) and, when given, `optimizer` (its state must be in the
// file). Returns the step and metadata.
CheckpointInfo load_checkpoint(const std::string& path, Module& model, Optimizer* optimizer = nullptr,
                               const LoadOptions& options = {});
// The same from a file already read (safetensors::load(path)), for callers that look
// at its metadata first.
CheckpointInfo load_checkpoint(const safetensors::Contents& contents, const std::string& path, Module& model,
                               Optimizer* optimizer = nullptr, const LoadOptions& options = {});

// One line per floating tensor of `tensors` that holds NaN or infinite values:
// "'conv1.weight' holds 3 NaN and 1 infinite of its 800 values". Empty when all are
// finite. Any device and dtype (checked on the exponent bits, no conversion).
std::vector<std::string> non_finite_tensors(const StateDict& tensors);

}  // namespace strata::nn
