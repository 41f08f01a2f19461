// strata_export: a strata model to ONNX (opset 17), from a checkpoint or freshly initialised.
//
//   # a strata_train checkpoint: its metadata names the model and its input
//   ./build/bin/strata_export --checkpoint runs/lenet.safetensors --out lenet.onnx
//   # any state dict of a named architecture (torchvision's ResNet-50 names, say)
//   ./build/bin/strata_export --model resnet50 --checkpoint r50.safetensors --out r50.onnx --fold-bn
//   # no checkpoint: the model as its init policy makes it (seeded)
//   ./build/bin/strata_export --model resnet18 --classes 10 --image-size 32 --out r18.onnx
//   # a GPT (GPT-2 small's shape unless given), and a random batch of ids with its logits
//   ./build/bin/strata_export --model gpt --layers 2 --heads 4 --embd 64 --vocab 512 --out gpt.onnx
//       --io gpt_io.safetensors --io-batch 2 --io-seq 16
//
// The file has one input "input" [batch, C, S, S] and one output "output" [batch, classes]
// (a GPT: "input" INT64 ids [batch, sequence], "output" logits [batch, sequence, vocab]);
// its initializers carry the state dict's names (see onnx/onnx.h). --io writes a random
// input and the model's output for it ("input", "logits"), computed by strata on --backend,
// for other runtimes to compare with.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "examples/train/presets.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/factories.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/lenet.h"
#include "strata/onnx/onnx.h"

using namespace strata;

namespace {

struct Flags {
  std::string model, variant = "tensorflow", backend = "reference";
  int64_t classes = 0, in_channels = 0, image_size = 0, base_channels = 64;
  nn::GptConfig gpt;  // GPT-2 small's shape by default
  int64_t seq = 0;    // a GPT's fixed sequence length in the file (0: open)
  uint64_t seed = 1;
};

std::unique_ptr<nn::Model> gpt_from_flags(const Flags& f) {
  manual_seed(f.seed);  // GPT-2's initialisation draws from the default generator
  return nn::make_gpt(f.gpt, ops::DispatchMode::virtual_call, f.backend);
}

// A random input for the file's model and strata's output for it, in a safetensors file:
// "input" (f32 [batch, C, S, S] in [0, 1), or a GPT's i64 ids [batch, seq]) and "logits".
// `vocab`: a GPT's vocabulary (0: not a GPT).
void write_io(nn::Model& model, int64_t vocab, const Shape& item, int64_t batch, uint64_t seed, const std::string& path) {
  Generator gen(seed);
  Shape sizes{batch};
  for (int64_t d : item) sizes.push_back(d);
  const Tensor input = vocab > 0 ? randint(0, vocab, sizes, gen) : rand(sizes, gen);
  const std::vector<Tensor> params = model.module().parameters();
  const Device device = params.empty() ? Device::cpu() : params.front().device();
  autograd::NoGradGuard no_grad;
  model.module().eval();
  const Tensor y = model.module().forward(input.to(device));
  Tensor logits = Tensor::empty(y.sizes(), DType::f32);
  copy_into(y, logits);
  nn::safetensors::save(path, {{"input", input}, {"logits", logits}}, {{"format", "pt"}});
}

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
    return nn::make_lenet(c, ops::DispatchMode::virtual_call, f.backend);
  }
  STRATA_CHECK(f.model.rfind("resnet", 0) == 0, "--model '", f.model,
               "' is not gpt, lenet, resnet18, resnet34, resnet50, resnet101 or resnet152");
  nn::ResNetConfig c;
  c.depth = std::stoi(f.model.substr(6).empty() ? "0" : f.model.substr(6));
  c.num_classes = classes;
  c.in_channels = channels;
  c.small_input = side <= 64;
  c.base_channels = f.base_channels;
  c.init.seed = f.seed;
  return nn::make_resnet(c, ops::DispatchMode::virtual_call, f.backend);
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
  auto* model_opt = app.add_option("--model", f.model, "gpt | lenet | resnet18 | resnet34 | resnet50 | resnet101 | resnet152 "
                                                       "(default: the checkpoint's strata_train metadata)");
  app.add_option("--lenet-variant", f.variant, "tensorflow | keras")->needs(model_opt);
  app.add_option("--classes", f.classes, "classes (default 10 for lenet, 1000 for resnet)")->needs(model_opt);
  app.add_option("--in-channels", f.in_channels, "input channels (default 1 for lenet, 3 for resnet)")->needs(model_opt);
  app.add_option("--image-size", f.image_size, "square input side (default 28 for lenet, 224 for resnet)")
      ->needs(model_opt);
  app.add_option("--base-channels", f.base_channels, "resnet width (default 64, torchvision's)")->needs(model_opt);
  app.add_option("--seed", f.seed, "init seed when there is no checkpoint")->needs(model_opt);
  app.add_option("--vocab", f.gpt.vocab_size, "gpt: vocabulary (default 50257)")->needs(model_opt);
  app.add_option("--block-size", f.gpt.block_size, "gpt: context length (default 1024)")->needs(model_opt);
  app.add_option("--layers", f.gpt.n_layer, "gpt: blocks (default 12)")->needs(model_opt);
  app.add_option("--heads", f.gpt.n_head, "gpt: attention heads (default 12)")->needs(model_opt);
  app.add_option("--embd", f.gpt.n_embd, "gpt: width (default 768)")->needs(model_opt);
  app.add_option("--seq", f.seq, "gpt: a fixed sequence length in the file (default: open)")->needs(model_opt);
  std::string io;
  int64_t io_batch = 2, io_seq = 16;
  app.add_option("--io", io, "also write a random input and the model's output for it (safetensors)");
  app.add_option("--io-batch", io_batch, "--io: rows (default 2)")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--io-seq", io_seq, "--io: a GPT's tokens per row (default 16, or --seq)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--backend", f.backend, "backend the model is built on, and --io computed on (default reference)");
  CLI11_PARSE(app, argc, argv);
  try {
    nn::safetensors::Contents ck;
    if (!checkpoint.empty()) ck = nn::safetensors::load(checkpoint);
    std::unique_ptr<nn::Model> model;
    int64_t channels = 0, side = 0;
    const bool gpt = f.model == "gpt";
    if (gpt) {
      model = gpt_from_flags(f);
    } else if (!f.model.empty()) {
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
    o.input_sizes = gpt ? (f.seq > 0 ? Shape{f.seq} : Shape{}) : Shape{channels, side, side};
    o.fold_batch_norm = fold;
    o.doc = model->describe();
    onnx::save_model(model->module(), out, o);
    if (!io.empty())
      write_io(*model, gpt ? f.gpt.vocab_size : 0, gpt ? Shape{f.seq > 0 ? f.seq : io_seq} : o.input_sizes, io_batch, f.seed + 1, io);
    if (gpt) {
      std::printf("strata_export: %s%s -> %s (%.1f MB, input ids [batch,%s])%s%s\n", model->describe().c_str(),
                  checkpoint.empty() ? " (initialised, no checkpoint)" : "", out.c_str(),
                  static_cast<double>(std::filesystem::file_size(out)) / 1e6,
                  f.seq > 0 ? std::to_string(f.seq).c_str() : "sequence", io.empty() ? "" : ", io -> ", io.c_str());
      return 0;
    }
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
