// gpt2_forward: GPT-2's layers (nn::Gpt, the tape-mode composition of the tensor API) on
// weights written by PyTorch, for bench/peers/pytorch_gpt2.py to compare with Hugging Face's
// GPT2LMHeadModel: reads the weights (GPT-2's names as nanoGPT lays them out) and the token
// ids, writes the logits, and times the forward (median over --repeat calls, synchronised).
//   gpt2_forward --weights w.safetensors --ids ids.safetensors --out logits.safetensors
//                --layers 2 --heads 4 --embd 64 --vocab 1000 --block 64 [--backend cuda]
//                [--hf] [--generate N]
// --hf: the weights are Hugging Face's own state dict (nn::load_hf_gpt2); --generate N: also
// N greedy tokens after the first row's ids (nn::generate), written as 'generated'.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/exit_status.h"
#include "strata/nn/generate.h"
#include "strata/nn/gpt_io.h"
#include "strata/nn/layers/transformer.h"
#include "strata/nn/safetensors.h"
#include "strata/ops/dispatch.h"

using namespace strata;

int main(int argc, char** argv) try {
  CLI::App app{"GPT-2's layers (nn::Gpt) forward on PyTorch's weights (bench/peers/pytorch_gpt2.py)"};
  std::string weights, ids_path, out, backend;
  nn::GptConfig c;
  int repeat = 20;
  bool hf = false;
  int64_t generate = 0;
  app.add_option("--weights", weights, "safetensors of GPT-2's parameters, nanoGPT's layout")->required();
  app.add_option("--ids", ids_path, "safetensors holding 'ids', i64 [B, T]")->required();
  app.add_option("--out", out, "safetensors to write 'logits' to")->required();
  app.add_option("--layers", c.n_layer)->required();
  app.add_option("--heads", c.n_head)->required();
  app.add_option("--embd", c.n_embd)->required();
  app.add_option("--vocab", c.vocab_size)->required();
  app.add_option("--block", c.block_size)->required();
  app.add_option("--backend", backend, "strata backend (default: the best available)");
  app.add_option("--repeat", repeat, "timed forwards")->check(CLI::Range(1, 10000));
  app.add_flag("--hf", hf, "the weights are GPT2LMHeadModel's state dict (Conv1D layout, 'transformer.' names)");
  app.add_option("--generate", generate, "greedy tokens to generate after the first row of ids")->check(CLI::Range(0, 4096));
  STRATA_CLI11_PARSE(app, argc, argv);

  auto& reg = backends::registry();
  backends::Backend& be = reg.get(backend.empty() ? reg.best() : std::string_view(backend));
  const ops::VirtualDispatch d(be);
  nn::Gpt<ops::VirtualDispatch> model(d, c);
  const nn::safetensors::Contents w = nn::safetensors::load(weights);
  if (hf)
    nn::load_hf_gpt2(model, w, weights);
  else
    model.load_state_dict(w.tensors);  // copies each host tensor to the model's device
  const Tensor ids = nn::safetensors::load(ids_path).tensors.at(0).second.to(d.device());
  autograd::NoGradGuard no_grad;
  Tensor logits = model.forward(ids);
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    d.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    logits = model.forward(ids);
    d.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  nn::StateDict results{{"logits", logits}};
  if (generate > 0) {
    d.synchronize();
    const auto g0 = std::chrono::steady_clock::now();
    results.emplace_back("generated", nn::generate(model, ids.slice(0, 0, 1), {.new_tokens = generate, .temperature = 0.0}));
    const double g_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - g0).count();
    std::printf("strata %s: greedy generation of %lld tokens after %lld: %.3f ms per token (key/value cache)\n",
                std::string(be.name()).c_str(), static_cast<long long>(generate), static_cast<long long>(ids.size(1)),
                g_ms / static_cast<double>(generate));
  }
  nn::safetensors::save(out, results);
  std::printf("strata %s: GPT-2 %lld layers, %lld heads, %lld embd, ids %s: forward %.3f ms (median of %d)\n",
              std::string(be.name()).c_str(), static_cast<long long>(c.n_layer), static_cast<long long>(c.n_head),
              static_cast<long long>(c.n_embd), ids.sizes().str().c_str(), ms[ms.size() / 2], repeat);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpt2_forward: %s\n", e.what());
  return 1;
}
