#pragma once
// A planned prediction as the code generator sees it: the kernel calls direct mode ran, in
// order, each with its argument struct, and the arena direct mode's memory planner laid the
// step's buffers out in. A backend's recorder (codegen/<backend>/) fills it by running the
// model's predict once more under that backend's call observer; the emitters read it.
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "strata/backends/cuda/call_observer.h"  // plain types: what a cuda call ran
#include "strata/ops/direct/arena_observer.h"
#include "strata/ops/table/op_args.h"
#include "strata/ops/table/op_id.h"

namespace strata::codegen {

// The argument structs of the ops a recorder can hand to an emitter: a prediction's, then
// those a training step adds (backward, loss, dropout, fills, the optimizer's single steps), then
// a GPT's forward (the lookups, layer norm, attention, GELU, the tied output projection), then its
// training step's backward (layer norm's, attention's, GELU's, the lookups' index_add, the reduction of
// the position embedding's gradient).
using RecordedArgs =
    std::variant<ops::Conv2dFwdArgs, ops::LinearFwdArgs, ops::ReluFwdArgs, ops::MaxPool2dFwdArgs,
                 ops::AvgPool2dFwdArgs, ops::GlobalAvgPoolFwdArgs, ops::AddArgs, ops::CopyArgs,
                 ops::Conv2dBwdDataArgs, ops::Conv2dBwdWeightArgs, ops::Conv2dBwdBiasArgs, ops::LinearBwdDataArgs,
                 ops::LinearBwdWeightArgs, ops::ReluBwdArgs, ops::MaxPool2dBwdArgs, ops::SoftmaxXentFwdArgs,
                 ops::SoftmaxXentBwdArgs, ops::DropoutFwdArgs, ops::DropoutBwdArgs, ops::FillArgs, ops::SgdStepArgs,
                 ops::BatchNormFwdArgs, ops::BatchNormBwdArgs, ops::GlobalAvgPoolBwdArgs, ops::SpaceToDepthArgs,
                 ops::SpaceToDepthBwdArgs, ops::IndexSelectArgs, ops::LayerNormFwdArgs, ops::AttentionFwdArgs,
                 ops::UnaryFwdArgs, ops::BmmArgs, ops::LayerNormBwdArgs, ops::AttentionBwdArgs, ops::UnaryBwdArgs,
                 ops::IndexAddArgs, ops::ReduceDimsArgs>;

struct RecordedCall {
  ops::OpId op;
  RecordedArgs args;
  // Whether the backend ran a library primitive (else its own plain loop), and the work it
  // sized the thread count by (backends/cpu/threads.h).
  bool primitive = false;
  int64_t work_units = 0, work_grain = 1;
  std::string layer;  // the module the call belongs to, for the generated code's comments
  // cuda: what the backend ran for the call, in order (the cuDNN engine a plan chose, the
  // GEMM as called, strata's own kernel): the choices the generated code must repeat.
  std::vector<backends::cuda::LibraryCall> library{};
  // A part of a call the backend composed of its own ops (a linear's epilogue: onednn's
  // on_composed), which the op trace lists once: the parts of one call share a group number
  // (>= 0), and composed_op is the call's op. -1: a call of its own.
  int composed = -1;
  ops::OpId composed_op{};
};

struct RecordedStep {
  std::string model;  // what the model is, for the generated code's header
  // A training step (Model::train_step: forward, loss, backward, the optimizer's step)
  // rather than a prediction; `labels` is then the planned labels buffer the loss read.
  bool training = false;
  ops::TensorView labels;
  ops::direct::PlannedArena arena;
  std::vector<RecordedCall> calls;
  ops::TensorView input;   // the caller's input buffer as the step's first call read it
  // The model's own input buffer the first call copies it into (Model::input_buffer(), kept
  // apart from the arena so that a caller can write into it).
  ops::TensorView input_buffer;
  ops::TensorView output;  // the planned buffer predict's result was copied from (in the arena)
  int64_t cudnn_version = 0;  // cuda: cudnnGetVersion() of the library the step ran on
  Device device = Device::cpu();  // where the arena, the input buffer and the constants live
  // The bytes of each of the model's tensors on a device, by device address (for the weights file).
  std::map<const void*, std::string> host_bytes;
};

}  // namespace strata::codegen
