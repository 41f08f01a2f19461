// study_resnet50 parity-data / parity: accuracy parity on a short training run.
// Every implementation of the study trains ResNet-50 from the same initial weights on
// the same batches in the same order, then evaluates on the same held-out set, so
// their loss curves and accuracies can be compared step by step.
//
// The task is synthetic (nothing is downloaded on the GPU machine): 10 classes, each a
// fixed random 4x4 pattern per channel upsampled to the resolution, plus per-pixel
// noise that is larger than the pattern, so a network must average over blocks to
// classify. The files, written by parity-data and read by everyone:
//   parity_data.safetensors  train_x f32 [N,3,R,R], train_y i64 [N], test_x, test_y
//   parity_init.safetensors  strata's ResNet-50 (1000 classes) initial state dict,
//                            under torchvision's names (nn::save_checkpoint)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "driver.h"
#include "strata/nn/nn.h"
#include "resnet50_support.h"

namespace strata::study {

namespace {

constexpr int64_t kParityClasses = 10;
constexpr int kPatternGrid = 4;
constexpr double kNoise = 1.5;  // uniform noise of this standard deviation; patterns have 0.58

std::pair<Tensor, Tensor> make_split(int64_t n, int64_t res, const std::vector<float>& patterns, std::mt19937_64& gen) {
  Tensor x = Tensor::empty(Shape{n, 3, res, res});
  Tensor y = Tensor::empty(Shape{n}, DType::i64);
  auto u = [&] { return static_cast<double>(gen() >> 11) * 0x1.0p-53; };
  float* xp = x.data<float>();
  int64_t* yp = y.data<int64_t>();
  const int64_t cell = std::max<int64_t>(1, res / kPatternGrid);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = static_cast<int64_t>(gen() % kParityClasses);
    yp[i] = c;
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t h = 0; h < res; ++h)
        for (int64_t w = 0; w < res; ++w) {
          const int64_t gh = std::min<int64_t>(h / cell, kPatternGrid - 1), gw = std::min<int64_t>(w / cell, kPatternGrid - 1);
          const float base = patterns[static_cast<size_t>(((c * 3 + ch) * kPatternGrid + gh) * kPatternGrid + gw)];
          *xp++ = base + static_cast<float>((u() * 2 - 1) * kNoise * std::sqrt(3.0));
        }
  }
  return {x, y};
}

json eval_accuracy(nn::Model& m, const Tensor& tx, const Tensor& ty, int64_t batch) {
  m.eval();
  const int64_t n = tx.size(0);
  int64_t correct = 0;
  double loss_sum = 0;
  const int64_t* yp = ty.data<int64_t>();
  for (int64_t s = 0; s + batch <= n; s += batch) {
    Tensor x = m.input_buffer(Shape{batch, tx.size(1), tx.size(2), tx.size(3)});
    copy_into(tx.narrow(0, s, batch), x);
    const std::vector<float> logits = m.predict(x).to_vector<float>();
    const int64_t k = static_cast<int64_t>(logits.size()) / batch;
    for (int64_t i = 0; i < batch; ++i) {
      const float* row = logits.data() + i * k;
      const float mx = *std::max_element(row, row + k);
      double z = 0;
      for (int64_t j = 0; j < k; ++j) z += std::exp(static_cast<double>(row[j] - mx));
      loss_sum += std::log(z) + mx - row[yp[s + i]];
      correct += (std::max_element(row, row + k) - row) == yp[s + i];
    }
  }
  const int64_t used = n / batch * batch;  // whole batches only, as every implementation does
  return {{"test_samples", used},
          {"test_acc", used ? static_cast<double>(correct) / static_cast<double>(used) : NAN},
          {"test_loss", used ? loss_sum / static_cast<double>(used) : NAN}};
}

}  // namespace

int run_parity_data(const std::string& dir, int64_t n_train, int64_t n_test, int64_t res, uint64_t seed) {
  std::filesystem::create_directories(dir);
  std::mt19937_64 gen(seed);
  std::vector<float> patterns(static_cast<size_t>(kParityClasses * 3 * kPatternGrid * kPatternGrid));
  for (float& v : patterns) v = static_cast<float>((static_cast<double>(gen() >> 11) * 0x1.0p-53 * 2 - 1));
  auto [trx, try_] = make_split(n_train, res, patterns, gen);
  auto [tex, tey] = make_split(n_test, res, patterns, gen);
  nn::safetensors::save(dir + "/parity_data.safetensors",
                        {{"train_x", trx}, {"train_y", try_}, {"test_x", tex}, {"test_y", tey}},
                        {{"what", "study parity task: 10 classes of 4x4 patterns + uniform noise"},
                         {"seed", std::to_string(seed)}});
  // The sweep's model (1000 classes); the task's labels use the first 10.
  auto model = bench::make_resnet50(ops::DispatchMode::virtual_call, "reference");
  nn::save_checkpoint(dir + "/parity_init.safetensors", model->module(), nullptr, 0,
                      {{"what", "strata ResNet-50 initial weights (kaiming_normal_fan_out, seed 0)"}});
  std::printf("parity-data: %lld train + %lld test images at %lldx%lld, init weights -> %s\n",
              static_cast<long long>(n_train), static_cast<long long>(n_test), static_cast<long long>(res),
              static_cast<long long>(res), dir.c_str());
  return 0;
}

int run_parity(const Options& o, const std::string& dir, const std::vector<std::string>& impls, int64_t batch,
               int epochs) {
  const auto data = nn::safetensors::load(dir + "/parity_data.safetensors").tensors;
  auto find = [&](const std::string& k) {
    for (const auto& [name, t] : data)
      if (name == k) return t;
    STRATA_FAIL("parity: ", dir, "/parity_data.safetensors has no '", k, "'");
  };
  const Tensor trx = find("train_x"), try_ = find("train_y"), tex = find("test_x"), tey = find("test_y");
  backends::Backend& be = backends::registry().get(o.backend);
  const bool cuda = be.device_type() == DeviceType::cuda;
  json doc = {{"study", 1},
              {"framework", "strata"},
              {"part", "parity"},
              {"device", bench::device_info(cuda)},
              {"protocol", {{"batch", batch}, {"epochs", epochs}, {"lr", o.lr}, {"momentum", 0.9}}},
              {"records", json::array()}};
  const int64_t steps_per_epoch = trx.size(0) / batch;
  for (const auto& impl : impls) {
    json r = {{"impl", "strata_" + impl}, {"framework", "strata"}, {"kind", "parity"}, {"batch", batch},
              {"resolution", trx.size(2)}};
    if (impl == "cudagraph" && !cuda) {
      r["status"] = "absent";
      r["note"] = "graph mode captures CUDA graphs: the cuda backend only";
    } else if (since_start_s() > o.deadline_s) {
      r["status"] = "skipped";
      r["note"] = "deadline: the part's time budget was spent";
    } else {
      try {
        if (cuda) backends::cuda::empty_cache();
        const auto t0 = std::chrono::steady_clock::now();
        // "cudagraph": graph mode, whose training steps are captured and replayed.
        const ops::DispatchMode mode = impl == "cudagraph" ? ops::DispatchMode::graph : ops::parse_dispatch_mode(impl);
        auto model = bench::make_resnet50(mode, o.backend);
        nn::load_checkpoint(dir + "/parity_init.safetensors", model->module());
        model->train();
        auto opt = model->make_optimizer(bench::sgd_config(o.lr));
        Tensor labels = model->targets_buffer(Shape{batch});
        json losses = json::array();
        for (int e = 0; e < epochs; ++e)
          for (int64_t s = 0; s < steps_per_epoch; ++s) {
            Tensor x = model->input_buffer(Shape{batch, 3, trx.size(2), trx.size(3)});
            copy_into(trx.narrow(0, s * batch, batch), x);
            copy_into(try_.narrow(0, s * batch, batch), labels);
            losses.push_back(model->train_step(x, labels, *opt).loss.item());
          }
        r.update(eval_accuracy(*model, tex, tey, batch));
        r["losses"] = losses;
        r["steps"] = losses.size();
        r["train_loss_last"] = losses.empty() ? json(nullptr) : losses.back();
        r["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r["status"] = "ok";
      } catch (const std::exception& e) {
        r["status"] = is_oom(e.what()) ? "oom" : "error";
        r["note"] = e.what();
        if (cuda) (void)cudaGetLastError();
      }
    }
    doc["records"].push_back(r);
    write_json(o.json_path, doc);
    if (r["status"] == "ok")
      std::printf("parity %-16s %3zu steps  loss %.4f -> %.4f  test acc %.4f  test loss %.4f  (%.1f s)\n",
                  r["impl"].get<std::string>().c_str(), r["steps"].get<size_t>(), r["losses"][0].get<double>(),
                  r["train_loss_last"].get<double>(), r["test_acc"].get<double>(), r["test_loss"].get<double>(),
                  r["seconds"].get<double>());
    else
      std::printf("parity %-16s %s %s\n", r["impl"].get<std::string>().c_str(),
                  r["status"].get<std::string>().c_str(), r.value("note", "").c_str());
    std::fflush(stdout);
  }
  return exit_status(doc["records"], "parity");
}

}  // namespace strata::study
