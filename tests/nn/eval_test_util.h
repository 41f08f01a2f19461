#pragma once
// Shared helpers of the inference-fusion tests (fused evaluation, batch-norm folding):
// models with non-trivial batch norms, and the ops a call ran.
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn_test_util.h"
#include "strata/backends/api/registry.h"
#include "strata/ops/trace.h"

namespace strata::testing {

// Running statistics away from their initial 0 / 1 (with `affine`, the batch norms'
// weight and bias away from 1 / 0 too), the same in a and in each of `others`.
inline void randomise_statistics(nn::Model& a, std::vector<nn::Model*> others, bool affine = false) {
  nn::StateDict sd = a.state_dict();
  uint64_t seed = 900;
  for (auto& [name, t] : sd) {
    const bool mean = name.ends_with("running_mean"), var = name.ends_with("running_var");
    // A batch norm's weight or bias: a sibling running_mean exists.
    const auto bn_param = [&](std::string_view suffix) {
      return affine && name.ends_with(suffix) &&
             nn::find_entry(sd, name.substr(0, name.size() - suffix.size()) + "running_mean") != nullptr;
    };
    const bool gamma = bn_param("weight"), beta = bn_param("bias");
    // gamma below 1 keeps deep networks' activations (and a training step's change) in range.
    if (mean || beta)
      copy_into(random_tensor(t.sizes(), t.dtype(), ++seed, -0.5, 0.5), t);
    else if (var)
      copy_into(random_tensor(t.sizes(), t.dtype(), ++seed, 0.5, 2.0), t);
    else if (gamma)
      copy_into(random_tensor(t.sizes(), t.dtype(), ++seed, 0.2, 0.8), t);
  }
  for (nn::Model* b : others) b->load_state_dict(sd);
}
inline void randomise_statistics(nn::Model& a, nn::Model& b) { randomise_statistics(a, {&b}); }

// The ops `run` ran, by name.
template <class Run>
std::vector<std::string> traced(Run&& run) {
  ops::take_trace();
  ops::set_trace_enabled(true);
  run();
  ops::set_trace_enabled(false);
  std::vector<std::string> names;
  for (const ops::TraceEvent& e : ops::take_trace()) names.emplace_back(ops::op_name(e.op));
  return names;
}

// The ops a predict ran; its output copied to the host into y.
inline std::vector<std::string> traced_ops(nn::Model& m, const Tensor& x, Tensor& y) {
  return traced([&] {
    const Tensor out = m.predict(x);
    y = Tensor::empty(out.sizes(), out.dtype(), Device::cpu());
    copy_into(out, y);
  });
}

// The reference backend and, when another one is built, the best CPU backend.
inline std::vector<std::string> cpu_backends() {
  std::vector<std::string> out = {"reference"};
  const std::string best(backends::registry().best(DeviceType::cpu));
  if (best != "reference") out.push_back(best);
  return out;
}

// Every case of the fusion tests: the reference backend (bitwise against the separate ops)
// and, when another one is built, the best CPU backend (within rounding), ResNet-18 and -50
// (tiny_resnet), every dispatch mode; run(backend, config, mode) under a trace naming them.
template <class Run>
void for_each_fusion_case(Run&& run) {
  for (const std::string& backend : cpu_backends())
    for (int depth : {18, 50})
      for (ops::DispatchMode mode : kAllModes) {
        SCOPED_TRACE(backend + " ResNet-" + std::to_string(depth) + " " + std::string(ops::dispatch_mode_name(mode)));
        run(backend, tiny_resnet(depth), mode);
      }
}

inline int count(const std::vector<std::string>& v, const std::string& s) {
  return static_cast<int>(std::count(v.begin(), v.end(), s));
}

// Batch-norm folding (tests/nn/fold_*_test.cpp). f32 tolerance of a folded model against the
// unfolded one's separate ops: relative error 1e-5 (the folded weights are rounded once to f32,
// and the convolution sums them in another order).
inline constexpr double kFoldTolF32 = 1e-5;

struct FoldPair {
  std::unique_ptr<nn::Model> folded, plain;
};
// The same ResNet twice, with non-trivial batch norms: folded, and with every op separate.
inline FoldPair make_fold_pair(int depth, ops::DispatchMode mode, const std::string& backend,
                               const nn::ModelOptions& o = {}) {
  nn::ResNetConfig c = tiny_resnet(depth);
  c.fold_batch_norm = true;
  FoldPair p{nn::make_resnet(c, mode, backend, o), nullptr};
  c.fold_batch_norm = false;
  c.fuse_eval = false;
  p.plain = nn::make_resnet(c, mode, backend, o);
  randomise_statistics(*p.folded, {p.plain.get()}, true);
  return p;
}

// A copy of t on the host, in its dtype.
inline Tensor host(const Tensor& t) {
  Tensor h = Tensor::empty(t.sizes(), t.dtype(), Device::cpu());
  copy_into(t, h);
  return h;
}

}  // namespace strata::testing
