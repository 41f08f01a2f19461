// gpt2_forward: GPT-2's layers (nn::Gpt) on weights written by PyTorch, for
// bench/peers/pytorch_gpt2.py to compare with Hugging Face's GPT2LMHeadModel: reads the weights
// (GPT-2's names as nanoGPT lays them out) and the token ids, writes the logits, and times the
// forward (median over --repeat calls, synchronised).
//   gpt2_forward --weights w.safetensors --ids ids.safetensors --out logits.safetensors
//                --layers 2 --heads 4 --embd 64 --vocab 1000 --block 64 [--backend cuda]
//                [--hf] [--generate N] [--decode N --rounds R] [--precision bf16]
// --hf: the weights are Hugging Face's own state dict (nn::load_hf_gpt2); --generate N: also
// N greedy tokens after the first row's ids (nn::generate), written as 'generated'.
// --decode N: greedy decoding of N tokens after the first row's ids, timed per token (the
// prompt's step included, as transformers' generate is timed) in each way strata decodes:
// virtual and static dispatch with the growing cache, static dispatch with the static cache,
// direct mode's planned steps over the static cache, and (cuda) the static-mode and the
// direct-mode step captured as a CUDA graph; R rounds, the order of the
// ways reversed every other round, each way's median and range printed, and every way's
// tokens checked equal. --json PATH also writes the study's figures (every round of every way),
// for the study's page. On cuda it then splits each mode's one-token step (over the static cache,
// the greedy token fed back on the device) into host and device time: the stream held behind a
// gate (stream_gate.h) while the host enqueues --split-steps steps, CUDA events around them once
// it opens; the same rounds, the modes' order alternating.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#ifdef STRATA_HAVE_BACKEND_CUDA
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "resnet50_support.h"
#include "stream_gate.h"
#include "strata/backends/api/registry.h"
#include "strata/ops/direct/graph_capture.h"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/exit_status.h"
#include "strata/nn/generate.h"
#include "strata/nn/gpt_io.h"
#include "strata/nn/layers/transformer.h"
#include "strata/nn/model.h"
#include "strata/nn/safetensors.h"
#include "strata/backends/static_backends.h"
#include "strata/ops/dispatch.h"

using namespace strata;

namespace {

struct Way {
  Way(std::string n, std::function<Tensor()> r) : name(std::move(n)), run(std::move(r)) {}
  std::string name;
  std::function<Tensor()> run;  // the generated tokens
  std::vector<double> ms_per_token;
  Tensor tokens;
};

#ifdef STRATA_HAVE_BACKEND_CUDA
// One mode's decoding step apart: host ms and device ms per token in each round.
struct Split {
  std::string mode;
  std::function<void(std::vector<double>&, std::vector<double>&)> round;  // appends host and device ms
  std::vector<double> host_ms = {}, device_ms = {};
};

// A round of `steps` one-token steps of `m` over a fresh static cache after the prompt, as
// nn::generate's greedy loop runs them (the argmax written into the next step's ids on the
// device), enqueued behind the held stream; `graph`: the step captured once, then launched.
template <class M, class Argmax>
void split_round(M& m, const Tensor& prompt, int64_t steps, bool graph, Argmax&& argmax, bench::StreamGate& gate,
                 std::vector<double>& host_ms, std::vector<double>& device_ms) {
  auto& impl = backends::registry().impl<backends::CudaBackend>();
  nn::KvCache cache = m.static_cache(1, prompt.size(1) + steps + 2);
  m.forward(prompt, &cache);
  const Tensor ids = prompt.narrow(1, prompt.size(1) - 1, 1).contiguous();
  Tensor logits;
  auto step = [&] {
    logits = m.forward(ids, &cache);
    argmax(logits, ids);
  };
  std::unique_ptr<ops::direct::CapturedGraph> captured;
  if (graph) {
    if constexpr (requires { *m.policy().impl; }) {
      step();  // the first step runs uncaptured, as generate's does
      captured = ops::direct::capture_step(*m.policy().impl, step);
    }
  } else {
    step();  // warm: the step's plans and allocations exist
  }
  impl.synchronize();
  cudaStream_t stream = static_cast<cudaStream_t>(impl.stream());
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  bench::cuda_check(cudaEventCreate(&e0), "cudaEventCreate");
  bench::cuda_check(cudaEventCreate(&e1), "cudaEventCreate");
  gate.hold();
  bench::cuda_check(cudaEventRecord(e0, stream), "cudaEventRecord");
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    if (captured) {
      cache.advance(1);
      captured->launch();
    } else {
      step();
    }
  }
  const double host = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  bench::cuda_check(cudaEventRecord(e1, stream), "cudaEventRecord");
  gate.open();
  bench::cuda_check(cudaEventSynchronize(e1), "cudaEventSynchronize");
  float device = 0;
  bench::cuda_check(cudaEventElapsedTime(&device, e0, e1), "cudaEventElapsedTime");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  host_ms.push_back(host / static_cast<double>(steps));
  device_ms.push_back(static_cast<double>(device) / static_cast<double>(steps));
}
#endif

// Greedy decoding of `tokens` after `prompt` in each way this build runs (the file's comment),
// alternating the order, timed per token. Every way must give the same tokens.
template <class Load>
nlohmann::json decode_study(nn::Gpt<ops::VirtualDispatch>& model, const ops::VirtualDispatch& d, Load&& load,
                            const Tensor& prompt, int64_t tokens, int rounds, int64_t split_steps) {
  std::vector<Way> ways;
  const nn::GenerateOptions greedy{.new_tokens = tokens, .temperature = 0.0};
  nn::GenerateOptions fixed = greedy, graph = greedy;
  fixed.static_cache = true;
  graph.graph = true;
  ways.push_back({"virtual, growing cache", [&] { return nn::generate(model, prompt, greedy); }});
#ifdef STRATA_HAVE_BACKEND_CUDA
  using Static = ops::StaticDispatch<backends::CudaBackend>;
  using Direct = ops::Direct<backends::CudaBackend>;
  std::unique_ptr<nn::Gpt<Static>> sm;
  std::unique_ptr<nn::Gpt<Direct>> dm;
  if (d.device().type == DeviceType::cuda) {
    sm = std::make_unique<nn::Gpt<Static>>(Static(), model.config());
    load(*sm);
    dm = std::make_unique<nn::Gpt<Direct>>(Direct(), model.config());
    load(*dm);
    ways.push_back({"static, growing cache", [&] { return nn::generate(*sm, prompt, greedy); }});
    ways.push_back({"static, static cache", [&] { return nn::generate(*sm, prompt, fixed); }});
    ways.push_back({"direct (static cache, planned steps)", [&] { return nn::generate(*dm, prompt, greedy); }});
    ways.push_back({"graph (static cache, captured step)", [&] { return nn::generate(*sm, prompt, graph); }});
    ways.push_back({"graph (static cache, captured direct step)", [&] { return nn::generate(*dm, prompt, graph); }});
  }
#else
  (void)load;
#endif
  for (Way& w : ways) w.tokens = w.run();  // warm-up: plans, library handles, the allocator's blocks
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < ways.size(); ++i) {
      Way& w = ways[r % 2 == 0 ? i : ways.size() - 1 - i];
      d.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      const Tensor got = w.run();
      d.synchronize();
      w.ms_per_token.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                               static_cast<double>(tokens));
      STRATA_CHECK(got.to_vector<int64_t>() == ways[0].tokens.to_vector<int64_t>(), "decode study: '", w.name,
                   "' gave other tokens than '", ways[0].name, "'");
    }
  nlohmann::json out = {{"new_tokens", tokens}, {"prompt_tokens", prompt.size(1)}, {"rounds", rounds},
                        {"ways", nlohmann::json::array()}};
  for (Way& w : ways) {
    // In the order measured: round r of every way ran in the same stretch of time (paired figures).
    out["ways"].push_back({{"way", w.name}, {"ms_per_token_by_round", w.ms_per_token}});
    std::sort(w.ms_per_token.begin(), w.ms_per_token.end());
    const double med = w.ms_per_token[w.ms_per_token.size() / 2];
    out["ways"].back()["ms_per_token_median"] = med;
    std::printf("strata decode %s: %lld tokens after %lld, %.4f ms per token (%.0f tokens/s), range %.4f-%.4f over %d "
                "rounds\n",
                w.name.c_str(), static_cast<long long>(tokens), static_cast<long long>(prompt.size(1)), med,
                1e3 / med, w.ms_per_token.front(), w.ms_per_token.back(), rounds);
  }
  std::printf("strata decode: every way gave the same %lld tokens\n", static_cast<long long>(tokens));
  const std::vector<int64_t> ids = ways[0].tokens.to(Device::cpu()).to_vector<int64_t>();
  std::string list;
  for (size_t i = static_cast<size_t>(prompt.size(1)); i < ids.size(); ++i) list += (list.empty() ? "" : ", ") + std::to_string(ids[i]);
  std::printf("strata tokens: [%s]\n", list.c_str());
  out["same_tokens_every_way"] = true;  // checked above, or the study failed
#ifdef STRATA_HAVE_BACKEND_CUDA
  if (sm && split_steps > 0) {
    using Cuda = backends::CudaBackend;
    const ops::StaticDispatch<Cuda> fed(backends::registry().impl<Cuda>());
    const auto by = [](const auto& p) {
      return [p](const Tensor& logits, const Tensor& ids) {
        ops::copy_(p, ops::reduce(p, ops::ReduceFn::argmax, logits, std::vector<int>{2}, false), ids);
      };
    };
    bench::StreamGate gate(backends::registry().impl<Cuda>().stream());
    std::vector<Split> modes;
    modes.push_back({"virtual", [&](auto& h, auto& dv) { split_round(model, prompt, split_steps, false, by(d), gate, h, dv); }});
    modes.push_back({"static", [&](auto& h, auto& dv) { split_round(*sm, prompt, split_steps, false, by(fed), gate, h, dv); }});
    modes.push_back({"direct", [&](auto& h, auto& dv) { split_round(*dm, prompt, split_steps, false, by(fed), gate, h, dv); }});
    modes.push_back({"graph", [&](auto& h, auto& dv) { split_round(*dm, prompt, split_steps, true, by(fed), gate, h, dv); }});
    for (int r = 0; r < rounds; ++r)
      for (size_t i = 0; i < modes.size(); ++i) {
        Split& m = modes[r % 2 == 0 ? i : modes.size() - 1 - i];
        m.round(m.host_ms, m.device_ms);
      }
    out["split"] = {{"steps_per_round", split_steps}, {"gate_timeouts", gate.timeouts()}, {"modes", nlohmann::json::array()}};
    for (Split& m : modes) {
      out["split"]["modes"].push_back({{"mode", m.mode}, {"host_ms_per_token_by_round", m.host_ms},
                                       {"device_ms_per_token_by_round", m.device_ms}});
      std::sort(m.host_ms.begin(), m.host_ms.end());
      std::sort(m.device_ms.begin(), m.device_ms.end());
      std::printf("strata decode step %s, host and device apart: host %.4f ms, device %.4f ms per token (medians of %d "
                  "rounds of %lld steps)\n",
                  m.mode.c_str(), m.host_ms[m.host_ms.size() / 2], m.device_ms[m.device_ms.size() / 2], rounds,
                  static_cast<long long>(split_steps));
    }
    if (gate.timeouts() > 0)
      std::printf("strata decode step: %d rounds waited for the held stream (a step synchronised): their host time "
                  "includes the gate's second\n",
                  gate.timeouts());
  }
#else
  (void)split_steps;
#endif
  return out;
}

// One one-token step over a static cache (the step graph mode captures), run uncaptured inside
// the NVTX range "decode_step" so that a profiler sees its kernels alone.
template <class Load>
void profile_one_step(nn::Gpt<ops::VirtualDispatch>& model, const ops::VirtualDispatch& d, Load&& load,
                      const Tensor& prompt) {
#ifdef STRATA_HAVE_BACKEND_CUDA
  STRATA_CHECK(d.device().type == DeviceType::cuda, "--profile-step: a cuda backend's step");
  using Static = ops::StaticDispatch<backends::CudaBackend>;
  nn::Gpt<Static> sm(Static(), model.config());
  load(sm);
  autograd::NoGradGuard no_grad;
  nn::KvCache cache = sm.static_cache(1, prompt.size(1) + 2);
  sm.forward(prompt, &cache);
  const Tensor next = prompt.narrow(1, 0, 1).contiguous();
  sm.forward(next, &cache);  // warm-up: the library handles a one-row step makes
  d.synchronize();
  nvtxRangePushA("decode_step");
  sm.forward(next, &cache);
  d.synchronize();
  nvtxRangePop();
  std::printf("strata: profiled one decoding step (NVTX range decode_step)\n");
#else
  (void)model, (void)d, (void)load, (void)prompt;
  STRATA_FAIL("--profile-step: this build has no cuda backend");
#endif
}

}  // namespace

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
  int64_t decode = 0;
  int rounds = 3;
  std::string precision = "fp32";
  app.add_option("--decode", decode, "greedy tokens to decode per timed run (0: no decoding study)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--rounds", rounds, "timed rounds of the decoding study")->check(CLI::Range(1, 100));
  std::string json_path;
  app.add_option("--json", json_path, "with --decode: the decoding study's figures to this file (JSON)");
  int64_t split_steps = 4;
  app.add_option("--split-steps", split_steps,
                 "(cuda) with --decode: steps enqueued behind the held stream per round when timing each mode's "
                 "host and device apart (0: not)")
      ->check(CLI::Range(0, 16));
  bool profile_step = false;
  app.add_flag("--profile-step", profile_step,
               "(cuda) one decoding step of the static cache in static mode inside the NVTX range 'decode_step', "
               "for a profiler: ncu --nvtx --nvtx-include 'decode_step/'");
  app.add_option("--precision", precision, "the model's dtype: fp32, bf16 or fp16 (every parameter and activation)");
  STRATA_CLI11_PARSE(app, argc, argv);
  STRATA_CHECK(json_path.empty() || decode > 0, "--json writes the decoding study's figures; give --decode N");

  auto& reg = backends::registry();
  backends::Backend& be = reg.get(backend.empty() ? reg.best() : std::string_view(backend));
  const ops::VirtualDispatch d(be);
  c.dtype = nn::parse_precision(precision).value_or(DType::f32);
  const nn::safetensors::Contents w = nn::safetensors::load(weights);
  auto load = [&](auto& m) {
    if (hf)
      nn::load_hf_gpt2(m, w, weights);
    else
      m.load_state_dict(w.tensors);  // copies (and converts) each host tensor to the model's device
  };
  nn::Gpt<ops::VirtualDispatch> model(d, c);
  load(model);
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
  if (decode > 0) {
    nlohmann::json study = decode_study(model, d, load, ids.slice(0, 0, 1), decode, rounds, split_steps);
    if (!json_path.empty()) {
      study["backend"] = std::string(be.name());
      study["precision"] = precision;
      study["model"] = {{"layers", c.n_layer}, {"heads", c.n_head}, {"embd", c.n_embd}, {"vocab", c.vocab_size}};
      std::FILE* f = std::fopen(json_path.c_str(), "w");
      STRATA_CHECK(f != nullptr, "gpt2_forward: cannot write --json '", json_path, "'");
      const std::string text = study.dump(1) + "\n";
      const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
      STRATA_CHECK(std::fclose(f) == 0 && ok, "gpt2_forward: writing --json '", json_path, "' failed");
    }
  }
  if (profile_step) profile_one_step(model, d, load, ids.slice(0, 0, 1));
  nn::safetensors::save(out, results);
  std::printf("strata %s: GPT-2 %lld layers, %lld heads, %lld embd, ids %s: forward %.3f ms (median of %d)\n",
              std::string(be.name()).c_str(), static_cast<long long>(c.n_layer), static_cast<long long>(c.n_head),
              static_cast<long long>(c.n_embd), ids.sizes().str().c_str(), ms[ms.size() / 2], repeat);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpt2_forward: %s\n", e.what());
  return 1;
}
