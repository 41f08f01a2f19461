// strata_infer: classify one image with a checkpoint written by strata_train, and
// time the inference (Gu, Gozum & Lam compare frameworks by exactly this number).
//
//   ./build/bin/strata_infer --checkpoint runs/lenet.safetensors --idx /usr/share/datasets/fashion-mnist --index 0
//   ./build/bin/strata_infer --checkpoint runs/lenet.safetensors --image shoe.jpg --invert
//
// The checkpoint's metadata names the dataset and architecture, so the network is
// rebuilt without further options. Inputs: an item of an IDX image file (or of the
// test split of an MNIST-layout directory, with its label), a JPEG, a PNG, or a
// binary PGM/PPM (data/image.h). Images are converted to the model's channels
// (luma or replication), resized bilinearly to its input size, scaled to [0,1] and
// normalised with the dataset's statistics. Fashion-MNIST items are light garments on black: photos of
// dark objects on white need --invert.
// Exit status (core/exit_status.h): 0 done, 1 a runtime error, 2 a usage error.
// STRATA_TRACE=1 writes the op trace when it ends (examples/train/trace_file.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "strata/backends/api/registry.h"
#include "strata/core/exit_status.h"
#include "strata/core/version.h"
#include "strata/data/idx.h"
#include "strata/data/image.h"
#include "strata/data/resize.h"
#include "examples/train/options.h"
#include "examples/train/presets.h"
#include "examples/train/trace_file.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/safetensors.h"
#include "strata/ops/trace.h"

using namespace strata;

namespace {

struct Input {
  Tensor chw;  // u8 [C,H,W]
  std::string what;
  int64_t label = -1;
};

Input load_image_file(const std::string& path) {
  Input in;
  in.chw = data::read_image_file(path);
  in.what = path;
  return in;
}

Input load_idx_item(const std::string& path, int64_t index, const std::string& dataset) {
  Input in;
  Tensor images, labels;
  if (std::filesystem::is_directory(path)) {
    data::InMemoryDataset ds = data::load_mnist_dir(path, data::Split::test, dataset);
    images = ds.images();
    labels = ds.labels();
    in.what = "item " + std::to_string(index) + " of the test split in " + path;
  } else {
    images = data::read_idx_images(path);
    in.what = "item " + std::to_string(index) + " of " + path;
    // The matching label file, when it sits next to the images.
    std::string lp = path;
    if (auto k = lp.find("images-idx3"); k != std::string::npos) {
      lp.replace(k, 11, "labels-idx1");
      if (std::filesystem::exists(lp)) labels = data::read_idx_labels(lp);
    }
  }
  STRATA_CHECK(index >= 0 && index < images.size(0), "--index ", index, " is out of range: ", in.what, " holds ",
               images.size(0), " images");
  in.chw = images.narrow(0, index, 1).contiguous().view(Shape{images.size(1), images.size(2), images.size(3)});
  if (labels.defined() && labels.size(0) == images.size(0)) in.label = labels.to_vector<int64_t>()[index];
  return in;
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// u8 [C,H,W] -> f32 [1,channels,side,side], normalised.
Tensor preprocess(const Tensor& img, int64_t channels, int64_t side, bool invert, const data::Normalize& norm) {
  const int64_t c = img.size(0), h = img.size(1), w = img.size(2);
  std::vector<uint8_t> src(img.data<uint8_t>(), img.data<uint8_t>() + img.numel());
  std::vector<uint8_t> conv(static_cast<size_t>(channels * h * w));
  for (int64_t y = 0; y < h * w; ++y) {
    if (channels == c) {
      for (int64_t k = 0; k < c; ++k) conv[static_cast<size_t>(k * h * w + y)] = src[static_cast<size_t>(k * h * w + y)];
    } else if (channels == 1) {  // RGB -> luma (ITU-R BT.601, as PIL's convert("L"))
      const double l = 0.299 * src[static_cast<size_t>(y)] + 0.587 * src[static_cast<size_t>(h * w + y)] +
                       0.114 * src[static_cast<size_t>(2 * h * w + y)];
      conv[static_cast<size_t>(y)] = static_cast<uint8_t>(std::lround(l));
    } else {  // grey -> RGB
      for (int64_t k = 0; k < channels; ++k) conv[static_cast<size_t>(k * h * w + y)] = src[static_cast<size_t>(y)];
    }
  }
  std::vector<uint8_t> sized(static_cast<size_t>(channels * side * side));
  if (h == side && w == side)
    sized = conv;
  else
    data::resize_bilinear(conv.data(), channels, h, w, data::PixelLayout::chw, sized.data(), side, side);
  std::vector<float> x(sized.size());
  for (int64_t k = 0; k < channels; ++k) {
    const float mean = norm.mean.size() == 1 ? norm.mean[0] : norm.mean[static_cast<size_t>(k)];
    const float sd = norm.std.size() == 1 ? norm.std[0] : norm.std[static_cast<size_t>(k)];
    for (int64_t i = 0; i < side * side; ++i) {
      const size_t j = static_cast<size_t>(k * side * side + i);
      const float v = (invert ? 255 - sized[j] : sized[j]) / 255.0f;
      x[j] = (v - mean) / sd;
    }
  }
  return Tensor::from_vector(x, Shape{1, channels, side, side});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata_infer: classify one image with a strata_train checkpoint and time the inference"};
  std::string checkpoint, image, idx, backend, dispatch = "direct";
  int64_t index = 0;
  int repeat = 100, warmup = 5, top = 3, threads = 0;
  bool invert = false, allow_non_finite = false;
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", version_line("strata_infer"));
  app.add_option("--checkpoint", checkpoint, "checkpoint written by strata_train")->required();
  auto* img_opt = app.add_option("--image", image, "a JPEG, PNG or binary PGM/PPM file");
  auto* idx_opt = app.add_option("--idx", idx, "an IDX image file, or an MNIST-layout directory (its test split)");
  img_opt->excludes(idx_opt);
  app.add_option("--index", index, "item of the IDX file")->check(CLI::NonNegativeNumber);
  app.add_option("--backend", backend, "backend (default: best CPU backend built)");
  app.add_option("--dispatch", dispatch,
                  "virtual | static | direct | graph (cuda: the prediction captured into a CUDA graph once per "
                  "shape and replayed)")
      ->check(CLI::IsMember({"virtual", "static", "direct", "graph"}));
  app.add_option("--repeat", repeat, "timed inferences")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup, "untimed inferences first")->check(CLI::Range(0, 1000000));
  app.add_option("--top", top, "classes to print")->check(CLI::Range(1, 1000));
  app.add_flag("--allow-non-finite", allow_non_finite,
               "load a checkpoint whose tensors hold NaN or infinity (refused otherwise; its outputs still are)");
  app.add_flag("--invert", invert, "invert the image (dark objects on white -> Fashion-MNIST's light on black)");
  app.add_option("--threads", threads, "threads of the backend libraries (0: environment)")->check(CLI::Range(0, 1024));
  STRATA_CLI11_PARSE(app, argc, argv);
  if (image.empty() && idx.empty()) {
    std::fprintf(stderr, "strata_infer: error: give an input: --image FILE or --idx PATH [--index N]\n");
    return kExitUsage;
  }
  train::apply_thread_count(threads, argv);
  try {
    if (backend.empty())
      backend = train::best_cpu_backend();
    else
      backends::registry().get(backend);  // the registry's error lists the built backends
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_infer: error: %s\n", e.what());
    return kExitUsage;
  }
  try {
    const nn::safetensors::Contents ck = nn::safetensors::load(checkpoint);
    std::string dataset;
    const train::ModelSpec spec = train::read_spec(ck.metadata, checkpoint, &dataset);
    const train::DatasetPreset& preset = train::dataset_preset(dataset);
    auto model = train::build_model(spec, ops::parse_dispatch_mode(dispatch), backend);
    // The model's tensors only (an optimizer's state in the file is left alone).
    const nn::CheckpointInfo loaded =
        nn::load_checkpoint(ck, checkpoint, model->module(), nullptr, {allow_non_finite, "--allow-non-finite"});
    for (const std::string& w : loaded.warnings)
      std::fprintf(stderr, "strata_infer: warning: %s (loaded: --allow-non-finite)\n", w.c_str());
    model->eval();
    auto step = ck.metadata.find("strata.step");
    std::printf("strata_infer: %s%s for %s from %s (step %s) | backend %s | dispatch %s | %s parameters\n",
                spec.model.c_str(), spec.model == "lenet" ? (" (" + spec.lenet_variant + ")").c_str() : "",
                dataset.c_str(), checkpoint.c_str(), step == ck.metadata.end() ? "?" : step->second.c_str(),
                backend.c_str(), dispatch.c_str(), with_commas(model->num_parameters()).c_str());

    if (backend == "null")
      std::printf("note: backend null computes nothing: the class, probabilities and correctness below are whatever "
                  "memory held, not results; the time is strata's own overhead\n");
    const Input in = image.empty() ? load_idx_item(idx, index, preset.idx ? dataset : "idx") : load_image_file(image);
    // IDX items come from an IDX dataset: a checkpoint of another one would answer in
    // its own classes, and the item's label means something else.
    const bool foreign = image.empty() && !preset.idx;
    if (foreign)
      std::fprintf(stderr,
                   "strata_infer: warning: %s was trained on %s (%lldx%lldx%lld images) but --idx gives an IDX item "
                   "[%lld,%lld,%lld] (the format of fashion-mnist and mnist): the answer is one of %s's classes, "
                   "and the item's label is not compared with it\n",
                   checkpoint.c_str(), dataset.c_str(), static_cast<long long>(spec.in_channels),
                   static_cast<long long>(spec.image_size), static_cast<long long>(spec.image_size),
                   static_cast<long long>(in.chw.size(0)), static_cast<long long>(in.chw.size(1)),
                   static_cast<long long>(in.chw.size(2)), dataset.c_str());
    const int64_t label = foreign ? -1 : in.label;
    const Tensor x = preprocess(in.chw, spec.in_channels, spec.image_size, invert, preset.normalize);
    auto name_of = [&](int64_t c) {
      return c >= 0 && c < static_cast<int64_t>(preset.class_names.size()) ? preset.class_names[static_cast<size_t>(c)]
                                                                           : std::to_string(c);
    };
    std::printf("input: %s [%lld,%lld,%lld] -> [%lld,%lld,%lld]%s", in.what.c_str(),
                static_cast<long long>(in.chw.size(0)), static_cast<long long>(in.chw.size(1)),
                static_cast<long long>(in.chw.size(2)), static_cast<long long>(spec.in_channels),
                static_cast<long long>(spec.image_size), static_cast<long long>(spec.image_size),
                invert ? ", inverted" : "");
    if (label >= 0) std::printf(", label %lld '%s'", static_cast<long long>(label), name_of(label).c_str());
    std::printf("\n");

    using Clock = std::chrono::steady_clock;
    std::vector<float> logits;
    for (int i = 0; i < warmup; ++i) logits = model->predict(x).to_vector<float>();
    std::vector<double> ms;
    for (int i = 0; i < repeat; ++i) {
      ops::TraceSpan span("predict");
      const auto t0 = Clock::now();
      logits = model->predict(x).to_vector<float>();  // includes the device-to-host copy of the logits
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    const int64_t k = static_cast<int64_t>(logits.size());
    // A NaN would sort anywhere and print as a probability: no class can be named.
    if (backend != "null")
      for (int64_t i = 0; i < k; ++i)
        STRATA_CHECK(std::isfinite(logits[static_cast<size_t>(i)]), "the model's output for ", in.what,
                     " is not finite (logit ", i, " of ", k, " is ", logits[static_cast<size_t>(i)],
                     "): the weights of ", checkpoint, " or the input overflow; no class can be named");
    std::vector<double> prob(logits.size());
    if (spec.task == train::Task::multilabel) {
      for (size_t i = 0; i < logits.size(); ++i) prob[i] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[i])));
    } else {
      const double mx = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (size_t i = 0; i < logits.size(); ++i) sum += prob[i] = std::exp(logits[i] - mx);
      for (double& p : prob) p /= sum;
    }
    std::vector<int64_t> order(static_cast<size_t>(k));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return prob[a] > prob[b]; });
    const int64_t best = order[0];
    std::printf("class: %lld '%s' (%s %.3f)", static_cast<long long>(best), name_of(best).c_str(),
                spec.task == train::Task::multilabel ? "sigmoid" : "p", prob[static_cast<size_t>(best)]);
    for (int64_t i = 1; i < std::min<int64_t>(top, k); ++i)
      std::printf("%s %lld '%s' %.3f", i == 1 ? " | next:" : ",", static_cast<long long>(order[i]),
                  name_of(order[i]).c_str(), prob[static_cast<size_t>(order[i])]);
    if (label >= 0) std::printf(" | %s", label == best ? "correct" : "wrong");
    std::printf("\n");
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
    std::printf("time per inference: %.3f ms median (mean %.3f, min %.3f, max %.3f) over %d runs after %d warm-up, "
                "batch 1\n",
                median, mean, sorted.front(), sorted.back(), repeat, warmup);
    train::write_trace_file("strata_infer", stderr);
    return kExitSuccess;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_infer: error: %s\n", e.what());
    train::write_trace_file("strata_infer", stderr);
    return kExitFailure;
  }
}
