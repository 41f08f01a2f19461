// strata_onnx_run: run an ONNX model with strata: import it (onnx/onnx.h), feed it a tensor
// from a safetensors file and write what it computes to another.
//
//   ./build/bin/strata_onnx_run --onnx resnet50.onnx --input io.safetensors --output out.safetensors
//   ./build/bin/strata_onnx_run --onnx resnet50.onnx --input io.safetensors --output out.safetensors
//       --backend cuda --dispatch all         (every dispatch mode, on the GPU)
//
// The input tensor is the file's entry named --input-name (default: the model's input
// name, else "input"); f32 [N, ...], or a GPT's integer token ids [N, T]. The output file holds "output" (one dispatch mode)
// or "output.virtual", "output.static", "output.direct" (--dispatch all), f32 on the host.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "strata/autograd/grad_mode.h"
#include "examples/train/options.h"
#include "strata/nn/safetensors.h"
#include "strata/onnx/onnx.h"

using namespace strata;

int main(int argc, char** argv) {
  CLI::App app{"strata_onnx_run: run an ONNX model with strata"};
  std::string model_path, input_path, input_name, output_path, backend, dispatch = "direct";
  int repeat = 1, threads = 0;
  app.add_option("--onnx", model_path, "the ONNX model")->required();
  app.add_option("--input", input_path, "a safetensors file holding the input")->required();
  app.add_option("--input-name", input_name, "the input's entry in that file (default: the model's input name)");
  app.add_option("--output", output_path, "the safetensors file to write")->required();
  app.add_option("--backend", backend, "backend (default: best CPU backend built)");
  app.add_option("--dispatch", dispatch, "virtual | static | direct | all")
      ->check(CLI::IsMember({"virtual", "static", "direct", "all"}));
  app.add_option("--repeat", repeat, "timed runs per mode (the output is the last one's)")->check(CLI::Range(1, 100000));
  app.add_option("--threads", threads, "threads of the backend libraries (0: environment)")->check(CLI::Range(0, 1024));
  CLI11_PARSE(app, argc, argv);
  train::apply_thread_count(threads, argv);
  try {
    if (backend.empty()) backend = train::best_cpu_backend();
    const nn::safetensors::Contents in = nn::safetensors::load(input_path);
    std::vector<std::string> modes;
    if (dispatch == "all")
      modes = {"virtual", "static", "direct"};
    else
      modes = {dispatch};
    nn::StateDict outputs;
    for (const std::string& mode : modes) {
      onnx::Imported imp = onnx::load_model(model_path, ops::parse_dispatch_mode(mode), backend);
      const std::string name = !input_name.empty() ? input_name
                               : nn::find_entry(in.tensors, imp.input_name) ? imp.input_name
                                                                            : "input";
      const Tensor* host = nn::find_entry(in.tensors, name);
      STRATA_CHECK(host, input_path, " has no tensor '", name, "' (give --input-name)");
      const std::vector<Tensor> params = imp.module->parameters();
      const Device device = params.empty() ? Device::cpu() : params.front().device();
      // A GPT takes i64 token ids: values of another dtype would be converted, not refused.
      STRATA_CHECK(imp.input_dtype != DType::i64 || !is_floating(host->dtype()), input_path, ": '", name, "' is ",
                   dtype_name(host->dtype()), " but the model takes integer token ids");
      Tensor x = Tensor::empty(host->sizes(), imp.input_dtype, device);
      copy_into(*host, x);
      autograd::NoGradGuard no_grad;
      Tensor y;
      std::vector<double> ms;
      for (int i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        y = imp.module->forward(x);
        Tensor h = Tensor::empty(y.sizes(), y.dtype());
        copy_into(y, h);  // waits for the device
        y = h;
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf("strata_onnx_run: %s (opset %lld, from %s) | %zu parameters | %s on %s | input %s -> output %s | "
                  "%.3f ms median of %d\n",
                  model_path.c_str(), static_cast<long long>(imp.opset), imp.producer.c_str(),
                  static_cast<size_t>(imp.module->num_parameters()), mode.c_str(), backend.c_str(),
                  host->sizes().str().c_str(), y.sizes().str().c_str(), ms[ms.size() / 2], repeat);
      outputs.emplace_back(modes.size() == 1 ? "output" : "output." + mode, y);
    }
    nn::safetensors::save(output_path, outputs, {{"format", "pt"}});
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_onnx_run: error: %s\n", e.what());
    return 1;
  }
}
