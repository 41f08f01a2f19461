#pragma once
// One emitter per backend: it records a model's planned prediction on its backend and
// writes it out as a standalone program for that backend's library. onednn is the first
// (codegen/onednn/); a cuda emitter (cuDNN calls, the CUDA graph captured at load) would
// be a second implementation of this interface, chosen by name in generate.cpp.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/codegen/buffer_map.h"
#include "strata/codegen/recorded_step.h"
#include "strata/nn/model.h"

namespace strata::codegen {

struct GeneratedFile {
  std::string name;  // relative to the output folder
  std::string text;
  bool binary = false;  // the weights: not counted as lines of code
};

class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual std::string_view backend() const = 0;
  // Runs the model's prediction for x and records it (recorded_step.h); `names` receives the
  // model's tensors by address.
  virtual RecordedStep record(nn::Model& model, const Tensor& x, std::map<const void*, std::string>& names) = 0;
  // The same for one training step (forward, loss, backward, the optimizer's step).
  virtual RecordedStep record_train(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                                    std::map<const void*, std::string>& names) = 0;
  // The generated project: sources, build file, and the weights (constants of `buffers`).
  virtual std::vector<GeneratedFile> emit(const RecordedStep& step, BufferMap& buffers) = 0;
  // A training step's weights file (its state) as it is now, after emit(): `steps_done` steps
  // since the recorded one began (1 right after it), which dropout's counters follow.
  virtual std::string state_file(const RecordedStep& step, const BufferMap& buffers, int64_t steps_done) = 0;
};

// The emitter for `backend`; throws listing those there are.
std::unique_ptr<Emitter> make_emitter(std::string_view backend);

}  // namespace strata::codegen
