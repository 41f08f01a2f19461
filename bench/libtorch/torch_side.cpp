// LibTorch's side of libtorch_cpu_bench: ResNet-50 as torchvision v1.5 defines it (the
// study's LibTorch definition; torchvision is not part of LibTorch), a single 3x3
// convolution and relu, each timed as PyTorch eager runs them (NCHW, f32, default algorithms);
// ResNet-50 inference also channels-last in the compute dtype.
#include <ATen/autocast_mode.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <filesystem>
#include <stdexcept>

#include "bench/libtorch/cases.h"
#include "bench/study/libtorch/resnet50.h"

namespace strata_bench {

namespace {

using study_libtorch::ResNet50;  // one torchvision-exact definition for both LibTorch peers

torch::Tensor filled(at::IntArrayRef sizes, float scale) {
  auto t = torch::empty(sizes);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = bench_value(i, scale);
  return t;
}

// torch.autocast("cpu", dtype=torch.bfloat16) for a scope, as the Python context
// manager does it.
struct AutocastBf16 {
  explicit AutocastBf16(bool on) : on_(on) {
    if (!on_) return;
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastBf16() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(false);
  }
  AutocastBf16(const AutocastBf16&) = delete;
  AutocastBf16& operator=(const AutocastBf16&) = delete;

 private:
  bool on_;
};

Case make(std::string mode, std::function<void()> step) {
  return {"libtorch", "", std::move(mode), std::move(step), {}};
}

// LeNet-5 as nn/lenet.h builds it (cases.h): eval mode, where its dropouts are the identity.
struct LeNetImpl : torch::nn::Module {
  explicit LeNetImpl(bool keras) : s(lenet_shape(keras)) {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, s.c1, 5).padding(s.pad)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(s.c1, s.c2, 5).padding(s.pad)));
    fc1 = register_module("fc1", torch::nn::Linear(s.flat(), s.hidden));
    fc2 = register_module("fc2", torch::nn::Linear(s.hidden, kLeNetClasses));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
    return fc2->forward(torch::relu(fc1->forward(x.flatten(1))));
  }
  LeNetShape s;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(LeNet);

}  // namespace

std::string& torchscript_folder() {
  static std::string folder;
  return folder;
}
void libtorch_use_torchscript(const std::string& folder) { torchscript_folder() = folder; }

namespace {
// export_torchscript.py's traced ResNet-50 in `dtype`, frozen and optimised for inference.
torch::jit::Module deployed_resnet50(bool bf16) {
  const auto path = std::filesystem::path(torchscript_folder()) / (bf16 ? "resnet50_bf16.pt" : "resnet50_f32.pt");
  if (!std::filesystem::exists(path))
    throw std::runtime_error("--torchscript: " + path.string() +
                             " does not exist (write it with bench/libtorch/export_torchscript.py)");
  torch::jit::Module m = torch::jit::load(path.string());
  m.eval();
  torch::jit::Module frozen = torch::jit::freeze(m);
  return torch::jit::optimize_for_inference(frozen);
}
}  // namespace

void libtorch_set_threads(int n) { torch::set_num_threads(n); }
int libtorch_threads() { return torch::get_num_threads(); }
std::string libtorch_describe() {
  return "LibTorch " TORCH_VERSION ", " + std::to_string(torch::get_num_threads()) + " intra-op threads, mkldnn " +
         (at::hasMKLDNN() ? "on" : "off");
}

std::vector<Case> libtorch_cases(const Workload& w) {
  torch::manual_seed(0);
  switch (w.kind) {
    case Kind::resnet_infer: {
      ResNet50 model;
      model->eval();
      auto x = filled({w.batch, 3, w.resolution, w.resolution}, 1.7f);
      const bool bf16 = w.bf16;
      // And as a user tuning LibTorch for CPU inference runs it: weights and input
      // channels-last (its oneDNN NHWC kernels), in the compute dtype (no autocast casts).
      ResNet50 tuned;
      tuned->eval();
      if (bf16) tuned->to(torch::kBFloat16);
      for (auto& p : tuned->parameters())
        if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
      auto xt = x.to(bf16 ? torch::kBFloat16 : torch::kFloat).contiguous(at::MemoryFormat::ChannelsLast);
      std::vector<Case> cases{make(bf16 ? "no_grad autocast" : "no_grad",
                                   [model, x, bf16]() mutable {
                                     torch::NoGradGuard g;
                                     AutocastBf16 a(bf16);
                                     model->forward(x);
                                   }),
                              make(bf16 ? "no_grad bf16 channels_last" : "no_grad channels_last", [tuned, xt]() mutable {
                                torch::NoGradGuard g;
                                tuned->forward(xt);
                              })};
      if (!torchscript_folder().empty()) {
        auto deployed = std::make_shared<torch::jit::Module>(deployed_resnet50(bf16));
        auto xs = x.to(bf16 ? torch::kBFloat16 : torch::kFloat);
        cases.push_back(make(bf16 ? "torchscript bf16 frozen optimize_for_inference"
                                  : "torchscript frozen optimize_for_inference",
                             [deployed, xs] {
                               torch::NoGradGuard g;
                               deployed->forward({xs});
                             }));
      }
      return cases;
    }
    case Kind::resnet_train: {
      ResNet50 model;
      model->train();
      auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
      auto x = filled({w.batch, 3, w.resolution, w.resolution}, 1.7f);
      auto labels = torch::randint(0, 1000, {w.batch}, torch::kLong);
      const bool bf16 = w.bf16;
      return {make(bf16 ? "grad autocast" : "grad", [model, opt, x, labels, bf16]() mutable {
        // Gradients set to none, as strata's zero_grad() and PyTorch >= 2.0 do
        // (LibTorch 1.13's zero_grad() writes zeros over 25.6 M floats).
        for (auto& p : model->parameters()) p.mutable_grad().reset();
        torch::Tensor loss;
        {
          AutocastBf16 a(bf16);  // forward and loss under autocast, backward outside
          loss = torch::nn::functional::cross_entropy(model->forward(x), labels);
        }
        loss.backward();
        opt->step();
      })};
    }
    case Kind::conv_fwd:
    case Kind::conv_train: {
      const auto dt = w.bf16 ? torch::kBFloat16 : torch::kFloat;
      auto x = filled({kConvN, kConvC, kConvHW, kConvHW}, 1.0f).to(dt);
      auto wt = filled({kConvK, kConvC, 3, 3}, 0.1f).to(dt);
      if (w.kind == Kind::conv_fwd)
        return {make("no_grad", [x, wt] {
          torch::NoGradGuard g;
          torch::conv2d(x, wt, {}, 1, 1);
        })};
      x.set_requires_grad(true);
      wt.set_requires_grad(true);
      auto dy = filled({kConvN, kConvK, kConvHW, kConvHW}, 0.5f).to(dt);
      return {make("grad", [x, wt, dy]() mutable {
        x.mutable_grad().reset();
        wt.mutable_grad().reset();
        torch::conv2d(x, wt, {}, 1, 1).backward(dy);
      })};
    }
    case Kind::relu: {
      auto x = filled({w.numel}, 1.0f);
      auto xg = filled({w.numel}, 1.0f).set_requires_grad(true);
      return {make("no_grad",
                   [x] {
                     torch::NoGradGuard g;
                     torch::relu(x);
                   }),
              make("grad", [xg] { torch::relu(xg); })};
    }
    case Kind::lenet_infer: {
      LeNet model(w.lenet_keras);
      model->eval();
      {
        torch::NoGradGuard g;
        for (auto& p : model->parameters())
          p.copy_(filled(p.sizes(), lenet_fill_scale(p.numel(), p.size(0), p.dim())));
      }
      auto x = filled({w.batch, 1, w.resolution, w.resolution}, 1.0f);
      auto forward = [model, x]() mutable {
        torch::NoGradGuard g;
        return model->forward(x);
      };
      Case c = make("no_grad", [forward]() mutable { forward(); });
      c.output = [forward]() mutable {
        auto y = forward().contiguous();
        return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
      };
      return {c};
    }
    case Kind::tensor_add: {
      auto a = filled({8, w.numel / 8}, 1.0f), b = filled({8, w.numel / 8}, 0.5f);
      auto bg = filled({8, w.numel / 8}, 0.5f).set_requires_grad(true);
      return {make("no_grad",
                   [a, b] {
                     torch::NoGradGuard g;
                     auto y = a + b;
                   }),
              make("grad", [a, bg] { auto y = a + bg; })};
    }
  }
  return {};
}

}  // namespace strata_bench
