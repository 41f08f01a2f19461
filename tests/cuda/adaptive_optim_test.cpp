// RMSprop, Adagrad and Adadelta on the cuda backend against the reference: every
// configuration of support/adaptive_optim_cases.h over several steps in the layouts a
// model's parameters have, with graph mode's device hyperparameters and loss scaling's
// state mixed in; the multi-tensor kernels bitwise against the single ones (several
// launches, strided tensors on the single kernel) and against the reference.
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "strata/backends/api/registry.h"
#include "support/adaptive_optim_cases.h"
#include "support/optimizer_lists.h"

namespace strata::testing {
namespace {

STRATA_COVERS(rmsprop_step, "cuda_vs_reference");
STRATA_COVERS(adagrad_step, "cuda_vs_reference");
STRATA_COVERS(adadelta_step, "cuda_vs_reference");
STRATA_COVERS(multi_rmsprop_step, "cuda_vs_reference");
STRATA_COVERS(multi_adagrad_step, "cuda_vs_reference");
STRATA_COVERS(multi_adadelta_step, "cuda_vs_reference");

class CudaAdaptiveOptim : public CudaTest {
 protected:
  static backends::Backend& cuda() { return backends::registry().get("cuda"); }
  static backends::Backend& reference() { return backends::registry().get("reference"); }
};

std::vector<Tensor> gpu_copies(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(to_gpu(t));
  return out;
}

// Step 1 plain; step 2 with lr (and Adagrad's count) read from device memory, the
// options' lr a decoy; step 3 with loss scaling on the device (the gradient scaled by 256,
// read times 1/256; one step skipped before, which Adagrad's count discounts).
TEST_F(CudaAdaptiveOptim, StepsMatchTheReference) {
  const Tensor amp = to_gpu(Tensor::from_vector<double>({256.0, 0.0, 1.0, 1.0 / 256.0}, Shape{4}));
  uint64_t seed = 71000;
  for (const AdaptiveCase& c : adaptive_cases())
    for (const ParamLayout& l : param_layouts({1000, 10})) {
      SCOPED_TRACE(c.name + ", " + l.name);
      const Tensor base = random_tensor(l.sizes, DType::f32, seed += 10, -1, 1, l.fmt);
      const Tensor cpu = l.transposed ? base.permute({1, 0}) : base;
      const Tensor gpu = l.transposed ? to_gpu(base).permute({1, 0}) : to_gpu(base);
      const std::vector<Tensor> st = new_state(c, cpu), st_g = gpu_copies(st);
      for (int64_t t = 1; t <= 3; ++t) {
        const Tensor g = random_tensor(cpu.sizes(), DType::f32, seed + static_cast<uint64_t>(t));
        if (t == 1) {
          adaptive_step(cuda(), c, gpu, to_gpu(g), st_g, t);
        } else if (t == 2) {
          const Tensor hyper = to_gpu(Tensor::from_vector<double>({case_lr(c), 2.0}, Shape{2}));
          adaptive_step(cuda(), c, gpu, to_gpu(g), st_g, 77, hyper, {}, 123.0);
        } else {
          const Tensor scaled = g.clone();
          ReferenceBackend{}.scale({g, scaled, 256.0});
          adaptive_step(cuda(), c, gpu, to_gpu(scaled), st_g, t + 1, {}, amp);
        }
        adaptive_step(reference(), c, cpu, g, st, t);
      }
      STRATA_EXPECT_CLOSE(gpu, cpu, kTolReduction, "param");
      for (size_t k = 0; k < st.size(); ++k)
        STRATA_EXPECT_CLOSE(st_g[k], st[k], kTolReduction, "state " + std::to_string(k));
    }
}

TEST_F(CudaAdaptiveOptim, MultiTensorStepsMatchSingleSteps) {
  expect_adaptive_multi_steps_match_single_steps(cuda(), [](const Tensor& t) { return to_gpu(t); });
}

// A list (one launch) against the reference's single steps.
TEST_F(CudaAdaptiveOptim, ListMatchesTheReference) {
  for (const AdaptiveCase& c : adaptive_cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<Tensor> p{random_tensor({3, 33}, DType::f32, 72000),
                                random_tensor({2, 8, 3, 3}, DType::f32, 72001, -1, 1, kNHWC)};
    const std::vector<Tensor> g{random_tensor({3, 33}, DType::f32, 72002),
                                random_tensor({2, 8, 3, 3}, DType::f32, 72003, -1, 1, kNHWC)};
    const std::vector<Tensor> pg = gpu_copies(p), gg = gpu_copies(g);
    std::vector<std::vector<Tensor>> st, st_g;
    for (const Tensor& t : p) {
      st.push_back(new_state(c, t));
      st_g.push_back(gpu_copies(st.back()));
    }
    const std::vector<int64_t> steps{1, 4};
    adaptive_multi_step(cuda(), c, pg, gg, st_g, steps);
    for (size_t i = 0; i < p.size(); ++i) adaptive_step(reference(), c, p[i], g[i], st[i], steps[i]);
    for (size_t i = 0; i < p.size(); ++i) {
      STRATA_EXPECT_CLOSE(pg[i], p[i], kTolReduction, "params[" + std::to_string(i) + "]");
      for (size_t k = 0; k < st[i].size(); ++k)
        STRATA_EXPECT_CLOSE(st_g[i][k], st[i][k], kTolReduction, "state " + std::to_string(k));
    }
  }
}

}  // namespace
}  // namespace strata::testing
