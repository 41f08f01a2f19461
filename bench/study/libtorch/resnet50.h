#pragma once
// ResNet-50 exactly as torchvision.models.resnet50 (v1.5: stride on the bottleneck's
// 3x3 conv; convs without bias; BatchNorm eps 1e-5, momentum 0.1; in-place ReLU and
// residual add), written in LibTorch's C++ frontend, with torchvision's parameter and
// buffer names so a torchvision state dict loads by name. The study's LOC counter
// counts the lines between the markers (tools/study/count_loc.py).
#include <torch/torch.h>

#include <string>

namespace study_libtorch {

// study-loc: begin libtorch
inline torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}

struct BottleneckImpl : torch::nn::Module {
  static constexpr int64_t kExpansion = 4;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};

  BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride) {
    conv1 = register_module("conv1", conv(inplanes, planes, 1, 1, 0));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(planes));
    conv3 = register_module("conv3", conv(planes, planes * kExpansion, 1, 1, 0));
    bn3 = register_module("bn3", torch::nn::BatchNorm2d(planes * kExpansion));
    if (stride != 1 || inplanes != planes * kExpansion)
      downsample = register_module(
          "downsample", torch::nn::Sequential(conv(inplanes, planes * kExpansion, 1, stride, 0),
                                              torch::nn::BatchNorm2d(planes * kExpansion)));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out)).relu_();
    out = bn3(conv3(out));
    out += downsample ? downsample->forward(x) : x;
    return out.relu_();
  }
};
TORCH_MODULE(Bottleneck);

struct ResNet50Impl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  torch::nn::Linear fc{nullptr};

  explicit ResNet50Impl(int64_t num_classes = 1000) {
    conv1 = register_module("conv1", conv(3, 64, 7, 2, 3));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(64));
    int64_t inplanes = 64;
    auto stage = [&](const char* name, int64_t planes, int blocks, int64_t stride) {
      torch::nn::Sequential s;
      for (int b = 0; b < blocks; ++b) {
        s->push_back(Bottleneck(inplanes, planes, b == 0 ? stride : 1));
        inplanes = planes * BottleneckImpl::kExpansion;
      }
      return register_module(name, s);
    };
    layer1 = stage("layer1", 64, 3, 1);
    layer2 = stage("layer2", 128, 4, 2);
    layer3 = stage("layer3", 256, 6, 2);
    layer4 = stage("layer4", 512, 3, 2);
    fc = register_module("fc", torch::nn::Linear(512 * BottleneckImpl::kExpansion, num_classes));
    // torchvision's init: kaiming-normal (fan_out, relu) convs, BatchNorm (1, 0);
    // Linear keeps the framework default, as there.
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* c = m->as<torch::nn::Conv2d>())
        torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      else if (auto* bn = m->as<torch::nn::BatchNorm2d>()) {
        torch::nn::init::ones_(bn->weight);
        torch::nn::init::zeros_(bn->bias);
      }
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = bn1(conv1(x)).relu_();
    h = torch::max_pool2d(h, 3, 2, 1);
    h = layer4->forward(layer3->forward(layer2->forward(layer1->forward(h))));
    return fc(torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1));
  }
};
TORCH_MODULE(ResNet50);
// study-loc: end libtorch

}  // namespace study_libtorch
