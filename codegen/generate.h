#pragma once
// strata_codegen's library: a model's prediction, planned by direct mode, written out as
// a standalone project (sources, build file, weights) that needs only the backend's library.
//
//   auto model = nn::make_lenet(cfg, ops::DispatchMode::direct, "onednn");
//   model->eval();
//   codegen::generate(*model, x, {"out/lenet", "onednn"});   // x: the input shape it is for
//
// docs/codegen.md says what the project holds and how to build and run it.
#include <cstdint>
#include <string>
#include <vector>

#include "strata/nn/model.h"

namespace strata::codegen {

struct GenerateOptions {
  std::string out_dir;
  std::string backend = "onednn";
  bool overwrite = false;    // write into an existing, non-empty out_dir
  std::string description;   // what the model is, for the generated code's header
  // A training step: also run this many more steps in strata after the recorded one and write
  // what the program must reproduce from its weights file into out_dir/check: input.npy,
  // labels.npy, losses.txt (model_train's output) and expected_weights.bin (the state after them),
  // and labels_out_of_range.npy, a batch model_train must refuse.
  int64_t check_steps = 0;
};

struct GenerateResult {
  std::vector<std::string> files;  // written, relative to out_dir
  int64_t code_lines = 0;          // lines of the generated sources (not the build file, not the weights)
  int64_t model_lines = 0;         // of those, the forward pass's own file (model.cpp)
  int64_t calls = 0;               // kernel calls written out
  int64_t arena_bytes = 0;
  int64_t weight_bytes = 0;
};

// Records model.predict(x) (the model in evaluation, direct mode on `backend`, not yet run
// at x's shape: the memory plan is read as it is made) and writes the project into out_dir. Throws strata::Error naming the op, argument or shape the
// generator does not support, and refusing an existing non-empty out_dir unless overwrite.
GenerateResult generate(nn::Model& model, const Tensor& x, const GenerateOptions& o);

// The same for one training step, model.train_step(x, labels, opt) (the model in training
// mode, not yet trained at x's shape; two steps run, the second is recorded). The project's
// Model::train_step continues from the state after the recorded step (its weights file), so
// that its step k is strata's step 2 + k on the same batch.
GenerateResult generate_train_step(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                                   const GenerateOptions& o);

// Writes t (contiguous f32 or i64) as a NumPy .npy file, the generated program's tensor format.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace strata::codegen
