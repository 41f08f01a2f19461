// strata's side of libtorch_cpu_bench: the same workloads as torch_side.cpp through
// nn::make_resnet (ResNet-50), the op front end or a direct plan (conv, relu), in
// each dispatch mode on each CPU backend built.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string_view>

#include "strata/autograd/default_dispatch.h"
#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/nn/nn.h"
#include "strata/ops/direct/plans.h"
#include "strata/ops/trace.h"
#include "strata/backends/static_backends.h"
#ifdef STRATA_HAVE_BACKEND_ONEDNN
#include "strata/backends/onednn/onednn_backend.h"
#endif
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
#include "strata/backends/openblas/openblas_backend.h"
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
#include "strata/backends/eigen/eigen_backend.h"
#endif

#include "bench/libtorch/cases.h"

namespace strata_bench {

namespace {

using namespace strata;  // NOLINT: bench-local

Tensor filled(const Shape& s, float scale) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = bench_value(i, scale);
  return t;
}

// How a ResNet case runs its batch norms, the suffix of the case's mode: "" fused with the
// ReLU and residual add after them (nn::ResNetConfig::fuse_eval and fuse_train, the
// defaults), "/unfused" the separate ops, "/folded" folded into the convolutions for
// inference (nn::ResNetConfig::fold_batch_norm), "/folded_nhwc" the same on a channels-last
// model (the input stays NCHW, as LibTorch's); "/folded_nhwc_direct" that without Winograd
// transforms (nn::ResNetConfig::winograd, on by default for onednn), "/folded_nhwc_s2d" with
// the stem over 2x2 pixel blocks (nn::ResNetConfig::space_to_depth_stem), "/folded_nhwc_copy"
// with each residual copied into a new output rather than accumulated in place
// (nn::ResNetConfig::residual_in_place, on by default for onednn).
struct Variant {
  std::string_view suffix;
  bool fuse, fold, channels_last = false;
  std::optional<bool> winograd = std::nullopt, s2d_stem = std::nullopt, residual_in_place = std::nullopt;
};
const Variant kVariants[] = {{"/unfused", false, false},
                             {"/folded_nhwc_direct", true, true, true, false},
                             {"/folded_nhwc_copy", true, true, true, std::nullopt, std::nullopt, false},
                             {"/folded_nhwc_s2d", true, true, true, std::nullopt, true},
                             {"/folded_nhwc", true, true, true},
                             {"/folded", true, true},
                             {"", true, false}};

Case resnet_case(const Workload& w, const std::string& backend, ops::DispatchMode mode, const Variant& v) {
  nn::ResNetConfig rc;
  rc.depth = 50;
  rc.num_classes = 1000;
  rc.fuse_eval = v.fuse;
  rc.fuse_train = v.fuse;
  rc.fold_batch_norm = v.fold;
  rc.winograd = v.winograd;
  rc.space_to_depth_stem = v.s2d_stem;
  rc.residual_in_place = v.residual_in_place;
  nn::ModelOptions mo;
  mo.borrowed_results = true;  // measured: no copy of the planned outputs (read before the next step)
  if (w.bf16) mo.compute_dtype = DType::bf16;
  if (v.channels_last) mo.memory_format = MemoryFormat::channels_last;
  std::shared_ptr<nn::Model> model = nn::make_resnet(rc, mode, backend, mo);
  Tensor x = model->input_buffer(Shape{w.batch, 3, w.resolution, w.resolution});
  copy_into(filled(x.sizes(), 1.7f), x);
  Case c{"strata", backend, std::string(ops::dispatch_mode_name(mode)) + std::string(v.suffix), {}, {}};
  if (w.kind == Kind::resnet_infer) {
    model->eval();
    c.step = [model, x] { model->predict(x); };
    return c;
  }
  model->train();
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::sgd;
  oc.lr = 0.01;
  oc.momentum = 0.9;
  std::shared_ptr<nn::Optimizer> opt = model->make_optimizer(oc);
  std::mt19937_64 gen(1);
  Tensor labels = model->targets_buffer(Shape{w.batch});  // read in place, as the input buffer
  for (int64_t i = 0; i < w.batch; ++i) labels.data<int64_t>()[i] = static_cast<int64_t>(gen() % 1000);
  c.step = [model, opt, x, labels] { model->train_step(x, labels, *opt); };
  return c;
}

// LeNet-5 inference at batch 1 (cases.h: the parameters filled as torch_side.cpp fills LibTorch's).
Case lenet_case(const Workload& w, const std::string& backend, ops::DispatchMode mode) {
  nn::LeNetConfig lc;
  lc.variant = w.lenet_keras ? nn::LeNetVariant::keras : nn::LeNetVariant::tensorflow;
  lc.input_size = w.resolution;
  nn::ModelOptions mo;
  mo.borrowed_results = true;  // measured: no copy of the planned outputs (read before the next step)
  std::shared_ptr<nn::Model> model = nn::make_lenet(lc, mode, backend, mo);
  model->eval();
  nn::StateDict sd = model->state_dict();
  for (auto& [name, t] : sd) t = filled(t.sizes(), lenet_fill_scale(t.numel(), t.size(0), t.dim()));
  model->load_state_dict(sd);
  Tensor x = model->input_buffer(Shape{w.batch, 1, w.resolution, w.resolution});
  copy_into(filled(x.sizes(), 1.0f), x);
  Case c{"strata", backend, std::string(ops::dispatch_mode_name(mode)), [model, x] { model->predict(x); }, {}, {}};
  c.output = [model, x] { return model->predict(x).to_vector<float>(); };
  return c;
}

// conv3x3 forward (or forward + backward data + backward weight) without the tape:
// the front end in the tape modes, a planned call in direct mode.
Tensor as_dtype(const Tensor& t, DType dt) {
  if (t.dtype() == dt) return t;
  Tensor o = Tensor::empty(t.sizes(), dt);
  copy_into(t, o);
  return o;
}

Case conv_case(const Workload& w, const std::string& backend, ops::DispatchMode mode) {
  const bool train = w.kind == Kind::conv_train;
  const DType dt = w.bf16 ? DType::bf16 : DType::f32;
  Tensor x = as_dtype(filled(Shape{kConvN, kConvC, kConvHW, kConvHW}, 1.0f), dt);
  Tensor wt = as_dtype(filled(Shape{kConvK, kConvC, 3, 3}, 0.1f), dt);
  Tensor dy = as_dtype(filled(Shape{kConvN, kConvK, kConvHW, kConvHW}, 0.5f), dt);
  ops::Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  std::function<void()> step = nn::with_policy(mode, backend, [&](const auto& pol) -> std::function<void()> {
    using P = std::decay_t<decltype(pol)>;
    if constexpr (nn::is_direct_v<P>) {
      // A plan holds raw pointers to its inputs: the closure keeps them alive.
      auto plan = std::make_shared<ops::direct::Conv2dPlan<typename P::Backend>>();
      plan->plan(*pol.impl, x, wt, Tensor(), p);
      if (!train) return [plan, x, wt] { plan->forward(); };
      plan->plan_backward(dy, /*need_dx=*/true);
      return [plan, x, wt, dy] {
        plan->forward();
        plan->backward();
      };
    } else {
      if (!train) return [pol, x, wt, p] { ops::conv2d(pol, x, wt, Tensor(), p); };
      return [pol, x, wt, dy, p] {
        ops::conv2d(pol, x, wt, Tensor(), p);
        ops::conv2d_bwd_data(pol, dy, wt, x.sizes(), p);
        ops::conv2d_bwd_weight(pol, x, dy, wt.sizes(), p);
      };
    }
  });
  return {"strata", backend, std::string(ops::dispatch_mode_name(mode)), std::move(step), {}};
}

// relu: the front end (tape modes, no tape), a direct plan, and autograd::relu on
// an input that requires grad (the tape node included) in the tape modes.
std::vector<Case> relu_cases(const Workload& w, const std::string& backend, ops::DispatchMode mode) {
  const Tensor x = filled(Shape{w.numel}, 1.0f);
  Tensor xg = filled(Shape{w.numel}, 1.0f);
  xg.set_requires_grad(true);
  const std::string name(ops::dispatch_mode_name(mode));
  std::vector<Case> out;
  nn::with_policy(mode, backend, [&](const auto& pol) {
    using P = std::decay_t<decltype(pol)>;
    if constexpr (nn::is_direct_v<P>) {
      auto plan = std::make_shared<ops::direct::ReluPlan<typename P::Backend>>();
      plan->plan(*pol.impl, x);
      out.push_back({"strata", backend, name, [plan, x] { plan->forward(); }, {}});
    } else {
      out.push_back({"strata", backend, name, [pol, x] { ops::relu(pol, x); }, {}});
      out.push_back({"strata", backend, name + "+grad", [pol, xg] { autograd::relu(pol, xg); }, {}});
    }
  });
  return out;
}

// a + b as a user of the tensor API writes it (operator+ on the default dispatcher), without
// and with a tape.
std::vector<Case> tensor_add_cases(const Workload& w) {
  const Tensor a = filled(Shape{8, w.numel / 8}, 1.0f), b = filled(Shape{8, w.numel / 8}, 0.5f);
  Tensor bg = filled(Shape{8, w.numel / 8}, 0.5f);
  bg.set_requires_grad(true);
  const std::string backend(autograd::default_dispatch(Device::cpu()).backend_name());
  return {{"strata", backend, "tensor_api", [a, b] {
             autograd::NoGradGuard g;
             Tensor y = a + b;
           }, {}},
          {"strata", backend, "tensor_api+grad", [a, bg] { Tensor y = a + bg; }, {}}};
}

// One step under the op trace: host time inside the backend per op, largest first.
std::function<std::string()> tracer(std::function<void()> step) {
  return [step] {
    ops::take_trace();
    ops::set_trace_enabled(true);
    step();
    ops::set_trace_enabled(false);
    std::map<ops::OpId, std::pair<int, double>> by;
    double total = 0;
    for (const auto& e : ops::take_trace()) {
      by[e.op].first++;
      by[e.op].second += e.host_us;
      total += e.host_us;
    }
    std::vector<std::pair<ops::OpId, std::pair<int, double>>> v(by.begin(), by.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    char b[128];
    std::snprintf(b, sizeof b, "%.2f ms in the backend:", total * 1e-3);
    std::string out = b;
    for (size_t i = 0; i < std::min<size_t>(v.size(), 12); ++i) {
      std::snprintf(b, sizeof b, " %s %dx%.0fus", std::string(op_name(v[i].first)).c_str(), v[i].second.first,
                    v[i].second.second / v[i].second.first);
      out += b;
    }
    return out;
  };
}

}  // namespace

std::vector<Case> strata_cases(const Workload& w, const std::vector<std::string>& backends,
                               const std::vector<std::string>& modes) {
  std::vector<Case> out;
  for (const auto& b : backends) {
    if (backends::registry().find(b) == nullptr) continue;
    for (const auto& m : modes) {
      // "<mode>/unfused" (ResNet inference and training), "<mode>/folded" (inference): variants
      // beside the default.
      const Variant& v = *std::find_if(std::begin(kVariants), std::end(kVariants),
                                       [&](const Variant& x) { return m.ends_with(x.suffix); });
      const ops::DispatchMode mode = ops::parse_dispatch_mode(m.substr(0, m.size() - v.suffix.size()));
      const bool applies = v.suffix.empty() || (v.fold ? w.kind == Kind::resnet_infer
                                                        : w.kind == Kind::resnet_infer || w.kind == Kind::resnet_train);
      if (!applies) continue;
      const bool bf16_ok = backends::registry().get(b).supports(ops::OpId::conv2d_fwd, DType::bf16);
      switch (w.kind) {
        case Kind::resnet_infer:
        case Kind::resnet_train:  // nn's mixed precision runs in the tape modes only
          if (!w.bf16 || (bf16_ok && mode != ops::DispatchMode::direct)) out.push_back(resnet_case(w, b, mode, v));
          break;
        case Kind::conv_fwd:
        case Kind::conv_train:
          if (!w.bf16 || bf16_ok) out.push_back(conv_case(w, b, mode));
          break;
        case Kind::relu:
          for (auto& c : relu_cases(w, b, mode)) out.push_back(std::move(c));
          break;
        case Kind::lenet_infer:
          out.push_back(lenet_case(w, b, mode));
          break;
        case Kind::tensor_add:  // the tensor API has one dispatcher: timed once, beside the first mode
          if (b == backends::registry().best(DeviceType::cpu) && m == modes.front())
            for (auto& c : tensor_add_cases(w)) out.push_back(std::move(c));
          break;
      }
    }
  }
  for (auto& c : out)
    if (c.mode.starts_with("virtual") || c.mode.starts_with("static")) c.trace = tracer(c.step);  // and variants
  return out;
}

std::vector<std::string> strata_describe() {
  std::vector<std::string> out{"strata backends: " + backends::registry().describe()};
#ifdef STRATA_HAVE_BACKEND_ONEDNN
  out.push_back("onednn: " + backends::registry().impl<backends::OneDnnBackend>().describe());
#endif
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
  out.push_back("openblas: " + backends::OpenBlasBackend::describe());
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
  out.push_back("eigen: " + backends::registry().impl<backends::EigenBackend>().describe());
#endif
  return out;
}

}  // namespace strata_bench
