// strata_export: a strata model to ONNX (opset 17), from a checkpoint or freshly initialised.
//
//   # a strata_train checkpoint: its metadata names the model and its input
//   ./build/bin/strata_export --checkpoint runs/lenet.safetensors --out lenet.onnx
//   # any state dict of a named architecture (torchvision's ResNet-50 names, say)
//   ./build/bin/strata_export --model resnet50 --checkpoint r50.safetensors --out r50.onnx --fold-bn
//   # no checkpoint: the model as its init policy makes it (seeded)
//   ./build/bin/strata_export --model resnet18 --classes 10 --image-size 32 --out r18.onnx
//
// The file has one input "input" [batch, C, S, S] and one output "output" [batch, classes];
// its initializers carry the state dict's names (see onnx/onnx.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "examples/train/presets.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/lenet.h"
#include "strata/onnx/onnx.h"

using namespace strata;

namespace {

struct Flags {
  std::string model, variant = "tensorflow";
  int64_t classes = 0, in_channels = 0, image_size = 0, base_channels = 64;
  uint64_t seed = 1;
};

// From the flags: any ResNet depth or LeNet variant, ImageNet sizes by default for ResNet,
// MNIST's for LeNet; the small-image ResNet stem at 64 px and below (as strata_train).
std::unique_ptr<nn::Model> from_flags(const Flags& f, int64_t& channels, int64_t& side) {
  const bool lenet = f.model == "lenet";
  channels = f.in_channels > 0 ? f.in_channels : (lenet ? 1 : 3);
  side = f.image_size > 0 ? f.image_size : (lenet ? 28 : 224);
  const int64_t classes = f.classes > 0 ? f.classes : (lenet ? 10 : 1000);
  if (lenet) {
    nn::LeNetConfig c;
    c.variant = nn::parse_lenet_variant(f.variant);
    c.num_classes = classes;
    c.in_channels = channels;
    c.input_size = side;
    c.init.seed = f.seed;
    return nn::make_lenet(c, ops::DispatchMode::virtual_call, "reference");
  }
  STRATA_CHECK(f.model.rfind("resnet", 0) == 0, "--model '", f.model,
               "' is not lenet, resnet18, resnet34, resnet50, resnet101 or resnet152");
  nn::ResNetConfig c;
  c.depth = std::stoi(f.model.substr(6).empty() ? "0" : f.model.substr(6));
  c.num_classes = classes;
  c.in_channels = channels;
  c.small_input = side <= 64;
  c.base_channels = f.base_channels;
  c.init.seed = f.seed;
  return nn::make_resnet(c, ops::DispatchMode::virtual_call, "reference");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata_export: a strata model to ONNX (opset 17)"};
  std::string checkpoint, out;
  bool fold = false;
  Flags f;
  app.add_option("--checkpoint", checkpoint, "weights: a strata_train checkpoint or any state dict (.safetensors)");
  app.add_option("--out", out, "the ONNX file to write")->required();
  app.add_flag("--fold-bn", fold, "fold each batch norm into the convolution before it");
  auto* model_opt = app.add_option("--model", f.model, "lenet | resnet18 | resnet34 | resnet50 | resnet101 | resnet152 "
                                                       "(default: the checkpoint's strata_train metadata)");
  app.add_option("--lenet-variant", f.variant, "tensorflow | keras")->needs(model_opt);
  app.add_option("--classes", f.classes, "classes (default 10 for lenet, 1000 for resnet)")->needs(model_opt);
  app.add_option("--in-channels", f.in_channels, "input channels (default 1 for lenet, 3 for resnet)")->needs(model_opt);
  app.add_option("--image-size", f.image_size, "square input side (default 28 for lenet, 224 for resnet)")
      ->needs(model_opt);
  app.add_option("--base-channels", f.base_channels, "resnet width (default 64, torchvision's)")->needs(model_opt);
  app.add_option("--seed", f.seed, "init seed when there is no checkpoint")->needs(model_opt);
  CLI11_PARSE(app, argc, argv);
  try {
    nn::safetensors::Contents ck;
    if (!checkpoint.empty()) ck = nn::safetensors::load(checkpoint);
    std::unique_ptr<nn::Model> model;
    int64_t channels = 0, side = 0;
    if (!f.model.empty()) {
      model = from_flags(f, channels, side);
    } else {
      STRATA_CHECK(!checkpoint.empty(), "give --checkpoint (a strata_train checkpoint) or --model");
      STRATA_CHECK(ck.metadata.count("strata.train.model"), checkpoint,
                   " has no strata_train metadata naming its model: give --model and its sizes");
      const train::ModelSpec spec = train::read_spec(ck.metadata, checkpoint, nullptr);
      model = train::build_model(spec, ops::DispatchMode::virtual_call, "reference");
      channels = spec.in_channels;
      side = spec.image_size;
    }
    if (!checkpoint.empty()) {
      nn::StateDict weights;
      for (const auto& [n, t] : ck.tensors)
        if (n.rfind(nn::kOptimizerPrefix, 0) != 0) weights.emplace_back(n, t);
      model->load_state_dict(weights, true);
    }
    onnx::ExportOptions o;
    o.input_sizes = Shape{channels, side, side};
    o.fold_batch_norm = fold;
    o.doc = model->describe();
    onnx::save_model(model->module(), out, o);
    std::printf("strata_export: %s%s -> %s (%.1f MB, input [batch,%lld,%lld,%lld], batch norm %s)\n",
                model->describe().c_str(), checkpoint.empty() ? " (initialised, no checkpoint)" : "", out.c_str(),
                static_cast<double>(std::filesystem::file_size(out)) / 1e6, static_cast<long long>(channels),
                static_cast<long long>(side), static_cast<long long>(side), fold ? "folded" : "kept");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_export: error: %s\n", e.what());
    return 1;
  }
}
