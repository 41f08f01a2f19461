// strata_codegen: a model's prediction, as strata's direct mode plans it, written out as a
// standalone project that needs only the backend's library (docs/codegen.md).
//
//   ./build/bin/strata_codegen --model lenet --seed 1 --input 1,1,28,28 --out gen/lenet
//   ./build/bin/strata_codegen --checkpoint runs/lenet.safetensors --input 8,1,28,28 --out gen/lenet8
//   ./build/bin/strata_codegen --model gpt --layers 2 --heads 2 --embd 64 --vocab 100 --block 16
//       --input 2,8 --out gen/gpt    (one command)
//   cmake -S gen/lenet -B gen/lenet/build && cmake --build gen/lenet/build
//   gen/lenet/build/model_run gen/lenet/weights.bin input.npy output.npy
//
// --check also writes check/input.npy (random, from --check-seed) and check/expected.npy,
// strata's own direct-mode output for it, which the generated program must reproduce bit
// for bit (the tests do exactly that). A GPT (--model gpt, nn::make_gpt) takes token ids,
// --input batch,tokens, and writes its logits.
// --train writes one training step instead (forward, softmax cross-entropy, backward, SGD with
// momentum) as Model::train_step and the program model_train; with --check, strata's losses and
// state after --check-steps more steps on the same batch go to check/ for model_train to match.
// --backend cuda writes the prediction (or the training step of LeNet-5 or ResNet-18/50) as cuDNN
// and cuBLAS calls and strata's own kernels (a .cu file), recorded on the GPU (docs/codegen.md,
// "The cuda emitter").
// Exit status (core/exit_status.h): 0 done, 1 a runtime error, 2 a usage error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <sstream>

#include "examples/train/options.h"
#include "examples/train/presets.h"
#include "strata/codegen/generate.h"
#include "strata/core/exit_status.h"
#include "strata/core/random.h"
#include "strata/core/version.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/safetensors.h"
#include "strata/ops/dispatch.h"

using namespace strata;

namespace {

// "N,C,H,W" (or for a GPT "B,T") -> sizes; throws naming the option and what the sizes are.
Shape parse_input(const std::string& s, size_t want, const char* names) {
  std::vector<int64_t> v;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) {
    try {
      size_t used = 0;
      const long long d = std::stoll(part, &used);
      STRATA_CHECK(used == part.size() && d > 0, "");
      v.push_back(d);
    } catch (const std::exception&) {
      STRATA_FAIL("--input '", s, "': '", part, "' is not a positive integer (want ", names, ")");
    }
  }
  STRATA_CHECK(v.size() == want, "--input '", s, "' has ", v.size(), " sizes; want ", want, ": ", names);
  return Shape(v.begin(), v.end());
}

// A GPT's token ids [B, T], uniform in [0, vocab).
Tensor random_tokens(const Shape& sizes, int64_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> v(static_cast<size_t>(sizes.numel()));
  for (int64_t& id : v) id = static_cast<int64_t>(gen() % static_cast<uint64_t>(vocab));
  return Tensor::from_vector(v, sizes);
}

Tensor random_input(const Shape& sizes, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(sizes.numel()));
  for (float& f : v) f = u(gen);
  return Tensor::from_vector(v, sizes);
}

// Runs `step` three times untimed (graph mode captures at the second), then `repeat` times, each
// timed by the host clock up to its result on the host, and prints the median as strata_codegen's
// timing line (tools/study/generated_sweep.py reads it): "strata's <mode> mode on <backend><what>".
void print_median(const std::function<void()>& step, const std::string& backend, ops::DispatchMode mode,
                  const char* what, const char* unit, int64_t repeat) {
  for (int i = 0; i < 3; ++i) step();
  std::vector<double> ms;
  for (int64_t i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("strata_codegen: strata's %s mode on %s%s: %.3f ms median (min %.3f, max %.3f) over %lld %s "
              "after 3\n",
              std::string(ops::dispatch_mode_name(mode)).c_str(), backend.c_str(), what, ms[ms.size() / 2], ms.front(),
              ms.back(), static_cast<long long>(repeat), unit);
}

// strata's own predict for x, in `mode`, timed as model_run times the generated program (input
// in, output out to the host).
void time_strata(const std::function<std::unique_ptr<nn::Model>(ops::DispatchMode)>& build,
                 const std::string& backend, ops::DispatchMode mode, const Tensor& x, int64_t repeat) {
  auto model = build(mode);
  model->eval();
  print_median([&] { model->predict(x).to(Device::cpu()); }, backend, mode, "", "runs", repeat);
}

// The modes --time measures: direct mode, and graph mode where the backend captures graphs (cuda).
std::vector<ops::DispatchMode> timed_modes(const std::string& backend) {
  if (backend == "cuda") return {ops::DispatchMode::direct, ops::DispatchMode::graph};
  return {ops::DispatchMode::direct};
}

// strata's own training step on (x, labels), in `mode`, timed as model_train --time times the
// generated program's (the batch in, the loss out to the host).
void time_strata_train(const std::function<std::unique_ptr<nn::Model>(ops::DispatchMode)>& build,
                       const std::string& backend, ops::DispatchMode mode, const Tensor& x, const Tensor& labels,
                       const nn::OptimizerConfig& oc, int64_t repeat) {
  auto model = build(mode);
  model->train();
  auto opt = model->make_optimizer(oc);
  print_median([&] { model->train_step(x, labels, *opt).loss.item(); }, backend, mode, ", training step", "steps",
               repeat);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata_codegen: write a model's direct-mode prediction out as a standalone program"};
  train::ModelSpec spec;
  std::string checkpoint, input = "", dtype = "f32", backend = "onednn", out;
  bool force = false, check = false, train = false;
  double lr = 0.05, momentum = 0.9;
  uint64_t check_seed = 1;
  int64_t check_steps = 3, time_repeat = 0;
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", version_line("strata_codegen"));
  app.add_option("--model", spec.model, "lenet | resnet18 | resnet50 | gpt (freshly initialised; see --seed)")
      ->check(CLI::IsMember({"lenet", "resnet18", "resnet50", "gpt"}));
  auto* ck_opt = app.add_option("--checkpoint", checkpoint,
                                "a checkpoint written by strata_train (its metadata names the model)");
  auto* seed_opt = app.add_option("--seed", spec.seed, "initialisation seed of a fresh model");
  ck_opt->excludes(seed_opt);
  auto* variant_opt = app.add_option("--lenet-variant", spec.lenet_variant, "tensorflow | keras");
  auto* classes_opt =
      app.add_option("--classes", spec.num_classes, "classes of a fresh model")->check(CLI::Range(1, 100000));
  // A GPT (nn::GptConfig): the options that only it takes.
  nn::GptConfig gpt;
  gpt.n_layer = 2, gpt.n_head = 2, gpt.n_embd = 64, gpt.vocab_size = 100, gpt.block_size = 16;
  const CLI::Option* gpt_opts[] = {
      app.add_option("--layers", gpt.n_layer, "--model gpt: transformer blocks")->check(CLI::Range(1, 1000)),
      app.add_option("--heads", gpt.n_head, "--model gpt: attention heads (dividing --embd)")->check(CLI::Range(1, 1000)),
      app.add_option("--embd", gpt.n_embd, "--model gpt: width")->check(CLI::Range(1, 1000000)),
      app.add_option("--vocab", gpt.vocab_size, "--model gpt: vocabulary (token ids in [0, vocab))")
          ->check(CLI::Range(1, 10000000)),
      app.add_option("--block", gpt.block_size, "--model gpt: the longest sequence (positions)")
          ->check(CLI::Range(1, 1000000))};
  std::string stem;
  auto* stem_opt = app.add_option("--stem", stem, "a fresh ResNet's stem: small (3x3, no pooling) or imagenet "
                                  "(7x7 stride 2 and max pooling); default: small for inputs of at most 64 px")
                       ->check(CLI::IsMember({"small", "imagenet"}));
  stem_opt->excludes(ck_opt);
  app.add_option("--input", input, "input shape batch,channels,height,width (default: batch 1, the model's own); "
                 "--model gpt: batch,tokens (default: 1,block)");
  app.add_option("--dtype", dtype, "data type of the generated code")->check(CLI::IsMember({"f32"}));
  app.add_option("--backend", backend, "library the generated code calls: onednn (the CPU), cuda (cuDNN, cuBLAS)")
      ->check(CLI::IsMember({"onednn", "cuda"}));
  app.add_option("--out", out, "output folder (new, or empty)")->required();
  app.add_flag("--force", force, "write into an output folder that exists and is not empty");
  app.add_flag("--check", check, "also write check/input.npy and strata's output for it, check/expected.npy");
  app.add_option("--check-seed", check_seed, "seed of the random check input");
  app.add_flag("--train", train, "a training step (forward, loss, backward, SGD) instead of the prediction");
  app.add_option("--lr", lr, "--train: SGD's learning rate")->check(CLI::PositiveNumber);
  app.add_option("--momentum", momentum, "--train: SGD's momentum")->check(CLI::Range(0.0, 1.0));
  app.add_option("--check-steps", check_steps, "--train --check: strata's steps after the recorded one to compare")
      ->check(CLI::Range(1, 1000));
  app.add_option("--time", time_repeat, "also time strata's own predict (with --train: training step) for the "
                 "input in direct mode, and graph mode on cuda (the median of this many), as model_run REPEAT "
                 "(model_train --time) times the generated program")
      ->check(CLI::Range(1, 1000000));
  STRATA_CLI11_PARSE(app, argc, argv);
  try {
    std::optional<nn::safetensors::Contents> ck;
    Shape sizes;
    std::ostringstream what;
    std::function<std::unique_ptr<nn::Model>(ops::DispatchMode)> build;
    if (spec.model == "gpt") {
      STRATA_CHECK(checkpoint.empty(), "--checkpoint ", checkpoint, ": strata_codegen reads strata_train's "
                   "checkpoints (LeNet, ResNet); --model gpt writes out a freshly initialised GPT (--seed)");
      STRATA_CHECK(stem.empty() && variant_opt->count() == 0 && classes_opt->count() == 0, "--model gpt takes none "
                   "of --stem, --lenet-variant, --classes (a GPT's options: --layers, --heads, --embd, --vocab, "
                   "--block)");
      STRATA_CHECK(!train || backend == "onednn", "--train --model gpt --backend ", backend, ": a GPT's training "
                   "step is written out for the onednn backend only (the cuda emitter writes its prediction)");
      STRATA_CHECK(gpt.n_embd % gpt.n_head == 0, "--embd ", gpt.n_embd, " is not a multiple of --heads ", gpt.n_head);
      sizes = input.empty() ? Shape{1, gpt.block_size} : parse_input(input, 2, "batch,tokens");
      STRATA_CHECK(sizes[1] <= gpt.block_size, "--input ", input, ": ", sizes[1], " tokens, but the GPT's --block is ",
                   gpt.block_size, " (its longest sequence)");
      // A padded output projection's backward (its gradient's zero columns, the rows copied) is not written
      // out for training: the step's rows (batch times tokens) must stay below the padding's threshold.
      STRATA_CHECK(!train || sizes[0] * sizes[1] < gpt.pad_head_min_rows || gpt.padded_vocab() == gpt.vocab_size,
                   "--train --model gpt --input ", input, ": ", sizes[0] * sizes[1], " rows pad the vocabulary of ",
                   gpt.vocab_size, " to ", gpt.padded_vocab(), " (GptConfig::pad_head_min_rows is ",
                   gpt.pad_head_min_rows, "); a padded output projection's training step is not written out yet");
      build = [&](ops::DispatchMode mode) {
        manual_seed(spec.seed);  // GPT-2's initialisation draws from the default generator
        return nn::make_gpt(gpt, mode, backend);
      };
      what << "gpt (" << gpt.n_layer << " layers, " << gpt.n_head << " heads, width " << gpt.n_embd << ", vocabulary "
           << gpt.vocab_size << ", block " << gpt.block_size << "), initialised with seed " << spec.seed;
    } else {
      for (const CLI::Option* o : gpt_opts)
        STRATA_CHECK(o->count() == 0, o->get_name(), ": a GPT's option; --model ", spec.model, " takes none");
      if (!checkpoint.empty()) {
        ck = nn::safetensors::load(checkpoint);
        spec = train::read_spec(ck->metadata, checkpoint, nullptr);
      } else {
        spec.in_channels = spec.model == "lenet" ? 1 : 3;
        spec.image_size = spec.model == "lenet" ? 28 : 32;
      }
      sizes = input.empty() ? Shape{1, spec.in_channels, spec.image_size, spec.image_size}
                            : parse_input(input, 4, "batch,channels,height,width");
      STRATA_CHECK(sizes[1] == spec.in_channels, "--input ", input, ": ", sizes[1], " channels, but the ", spec.model,
                   " model takes ", spec.in_channels);
      STRATA_CHECK(sizes[2] == sizes[3], "--input ", input, ": the generator writes out square inputs (", sizes[2],
                   "x", sizes[3], " is not)");
      if (spec.model == "lenet" && !ck) spec.image_size = sizes[2];
      STRATA_CHECK(spec.model != "lenet" || sizes[2] == spec.image_size, "--input ", input, ": LeNet from ",
                   checkpoint, " was built for ", spec.image_size, "x", spec.image_size, " images, not ", sizes[2], "x",
                   sizes[3]);
      // A fresh ResNet's stem follows the input size (strata_train's rule) unless --stem names it; a
      // checkpoint's is its own, and ResNet runs any input size through it.
      if (spec.model != "lenet" && !ck) spec.image_size = sizes[2];
      STRATA_CHECK(stem.empty() || spec.model != "lenet", "--stem ", stem,
                   ": LeNet has no stem to choose (ResNet only)");
      if (!stem.empty()) spec.small_input = stem == "small";
      // The emitters write NCHW programs: the model is made NCHW whatever layout the backend would prefer.
      spec.memory_format = MemoryFormat::contiguous;
      build = [&](ops::DispatchMode mode) {
        auto m = train::build_model(spec, mode, backend);
        if (ck) nn::load_checkpoint(*ck, checkpoint, m->module(), nullptr, {});
        return m;
      };
      what << spec.model << (spec.model == "lenet" ? " (" + spec.lenet_variant + " variant)" : "") << ", "
           << spec.num_classes << " classes, "
           << (ck ? "weights of " + std::filesystem::path(checkpoint).filename().string()
                  : "initialised with seed " + std::to_string(spec.seed));
    }
    auto model = build(ops::DispatchMode::direct);
    if (train)
      model->train();
    else
      model->eval();
    const Tensor x =
        spec.model == "gpt" ? random_tokens(sizes, gpt.vocab_size, check_seed) : random_input(sizes, check_seed);
    // One line of what was written: `kind` prefixes the model's description, `state` names the file's contents.
    const auto report = [&](const codegen::GenerateResult& r, const char* kind, const char* state) {
      std::printf("strata_codegen: %s%s, input %s -> %s: %lld calls, arena %lld bytes, %s %lld bytes, %lld lines of "
                  "code (model.cpp %lld)\n",
                  kind, what.str().c_str(), sizes.str().c_str(), out.c_str(), static_cast<long long>(r.calls),
                  static_cast<long long>(r.arena_bytes), state, static_cast<long long>(r.weight_bytes),
                  static_cast<long long>(r.code_lines), static_cast<long long>(r.model_lines));
    };
    if (train) {
      // A class per image, or for a GPT the next token at each position.
      const bool gpt_model = spec.model == "gpt";
      const Shape label_sizes = gpt_model ? sizes : Shape{sizes[0]};
      const int64_t n_classes = gpt_model ? gpt.vocab_size : spec.num_classes;
      std::mt19937_64 gen(check_seed + 1);
      std::vector<int64_t> classes(static_cast<size_t>(label_sizes.numel()));
      for (int64_t& c : classes) c = static_cast<int64_t>(gen() % static_cast<uint64_t>(n_classes));
      nn::OptimizerConfig oc;
      oc.lr = lr;
      oc.momentum = momentum;
      auto opt = model->make_optimizer(oc);
      codegen::GenerateOptions go{out, backend, force, what.str()};
      go.check_steps = check ? check_steps : 0;
      const codegen::GenerateResult r =
          codegen::generate_train_step(*model, x, Tensor::from_vector(classes, label_sizes), *opt, go);
      report(r, "a training step of ", "state");
      if (time_repeat > 0) {
        const Tensor labels = Tensor::from_vector(classes, label_sizes);
        for (ops::DispatchMode mode : timed_modes(backend))
          time_strata_train(build, backend, mode, x, labels, oc, time_repeat);
      }
      return kExitSuccess;
    }
    const codegen::GenerateResult r = codegen::generate(*model, x, {out, backend, force, what.str()});
    if (check) {
      std::filesystem::create_directories(std::filesystem::path(out) / "check");
      codegen::write_npy((std::filesystem::path(out) / "check" / "input.npy").string(), x);
      codegen::write_npy((std::filesystem::path(out) / "check" / "expected.npy").string(),
                         model->predict(x).to(Device::cpu()));
      if (spec.model == "gpt") {  // ids whose last is one past the vocabulary: model_run must refuse them
        Tensor bad = x.clone();
        bad.data<int64_t>()[bad.numel() - 1] = gpt.vocab_size;
        codegen::write_npy((std::filesystem::path(out) / "check" / "tokens_out_of_range.npy").string(), bad);
      }
    }
    report(r, "", "weights");
    if (time_repeat > 0)
      for (ops::DispatchMode mode : timed_modes(backend))
        time_strata(build, backend, mode, x, time_repeat);
    return kExitSuccess;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_codegen: error: %s\n", e.what());
    return kExitFailure;
  }
}
