// The checkpoint loader: safetensors::load (nn/safetensors.h) on a file holding the
// bytes — the shared regular-file reader of core/file.h, then the parser — and what
// nn::load_checkpoint does with a parsed file — the model's load_state_dict and the
// optimizer's — into a small fixed model whose state has every kind of entry strata
// writes (f32 parameters and buffers, BatchNorm's i64 num_batches_tracked, Adam's
// per-parameter i64 step). fuzz/make_corpus.py writes valid checkpoints of this very
// model, so mutations start from files that load.
#include <memory>

#include "fuzz/fuzz_util.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/layers/batch_norm.h"
#include "strata/nn/layers/container.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/optim.h"
#include "strata/nn/safetensors.h"

namespace {

using namespace strata;
using P = ops::VirtualDispatch;

struct Target {
  nn::Sequential model;
  std::unique_ptr<nn::Optimizer> adam;
  Target() {
    const P p(backends::registry().get("reference"));
    model.add(std::make_unique<nn::Linear<P>>(p, 3, 2));    // "0.weight" [2,3], "0.bias" [2]
    model.add(std::make_unique<nn::BatchNorm2d<P>>(p, 2));  // "1.*", "1.num_batches_tracked" i64 []
    nn::OptimizerConfig c;
    c.kind = nn::OptimizerKind::adam;
    adam = std::make_unique<nn::Optimizer>(c, nn::param_groups(model, 0.0, false),
                                           nn::make_step_kernels(ops::DispatchMode::virtual_call, "reference"));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Target t;
  static fuzz::ScratchFile scratch("safetensors");
  const auto& path = scratch.write(data, size);
  fuzz::expect_ok_or_error([&] {
    nn::safetensors::Contents c = nn::safetensors::load(path.string());
    uint64_t total = 0;
    for (const auto& [name, tensor] : c.tensors) {
      STRATA_FUZZ_ASSERT(tensor.device().is_cpu() && tensor.is_contiguous());
      total += tensor.nbytes();
    }
    STRATA_FUZZ_ASSERT(total <= size);  // no tensor data is invented
    nn::StateDict weights, optim;
    for (auto& [n, tensor] : c.tensors) {
      if (n.rfind(nn::kOptimizerPrefix, 0) == 0)
        optim.emplace_back(n.substr(nn::kOptimizerPrefix.size()), tensor);
      else
        weights.emplace_back(n, tensor);
    }
    // Non-strict, so a partial dict still reaches the element conversions.
    fuzz::expect_ok_or_error([&] { t.model.load_state_dict(weights, false); });
    fuzz::expect_ok_or_error([&] { t.adam->load_state_dict(optim); });
  });
  return 0;
}
