// gpt2_train: GPT training through nn::Model, for bench/peers/pytorch_gpt2_train.py to compare
// with PyTorch on the same machine.
//   gpt2_train curve --weights w.safetensors --data batches.safetensors --out losses.json
//                    --layers 2 --heads 4 --embd 128 --vocab 512 --block 64 [--modes all]
//     Trains from PyTorch's initial weights (nanoGPT's names) on PyTorch's batches ('tokens',
//     i64 [steps, B, T+1]: inputs are the first T, targets the last T) with AdamW, one step per
//     batch, in each dispatch mode asked, and writes every step's loss per mode. The modes must
//     agree bitwise (the run fails otherwise): the four-mode check on the GPU.
//   gpt2_train speed --batch 16 --seq 1024 --precision bf16 --modes graph --steps 20
//     GPT-2 small (or --layers/--heads/--embd) on random tokens: median step time over
//     --rounds rounds of --steps steps (modes alternated each round), tokens/s, the model FLOPs
//     per token (6N + 6·L·C·T, nanoGPT's count) and peak memory, as JSON lines.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "strata/backends/api/registry.h"
#include "strata/core/allocator.h"
#include "strata/core/exit_status.h"
#include "strata/core/factories.h"
#include "strata/core/random.h"
#include "strata/nn/model.h"
#include "strata/nn/safetensors.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/trace.h"
#include "gpt2_support.h"
#include "trace_summary.h"
#ifdef STRATA_HAVE_BACKEND_CUDA
#include "strata/backends/cuda/cuda_backend.h"
#endif

using namespace strata;
using json = nlohmann::json;

namespace {

// "all": every mode this backend runs (graph needs cuda).
std::vector<ops::DispatchMode> parse_modes(const std::vector<std::string>& names, bool cuda) {
  if (names.size() == 1 && names[0] == "all") {
    std::vector<ops::DispatchMode> m{ops::DispatchMode::virtual_call, ops::DispatchMode::static_call,
                                     ops::DispatchMode::direct};
    if (cuda) m.push_back(ops::DispatchMode::graph);
    return m;
  }
  std::vector<ops::DispatchMode> out;
  for (const std::string& n : names) out.push_back(ops::parse_dispatch_mode(n));
  return out;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Common {
  nn::GptConfig c;
  std::string backend, precision = "fp32";
  std::vector<std::string> modes{"all"};
  double lr = 1e-3, wd = 0.1;
};

void add_common(CLI::App& app, Common& o) {
  app.add_option("--layers", o.c.n_layer);
  app.add_option("--heads", o.c.n_head);
  app.add_option("--embd", o.c.n_embd);
  app.add_option("--vocab", o.c.vocab_size);
  app.add_option("--block", o.c.block_size);
  app.add_option("--backend", o.backend, "strata backend (default: the best available)");
  app.add_option("--modes", o.modes, "dispatch modes, comma-separated, or all")->delimiter(',');
  app.add_option("--precision", o.precision, "compute dtype: fp32, or bf16/fp16 with f32 master weights");
  app.add_option("--lr", o.lr, "AdamW's learning rate (constant)");
  app.add_option("--weight-decay", o.wd, "AdamW's decoupled weight decay, every parameter");
}

std::unique_ptr<nn::Model> make(const Common& o, ops::DispatchMode mode, const std::string& backend) {
  return bench::make_gpt_model(o.c, o.precision, mode, backend);
}

int curve(const Common& o, const std::string& weights, const std::string& data, const std::string& out) {
  const std::string backend = o.backend.empty() ? std::string(backends::registry().best()) : o.backend;
  const bool cuda = backends::registry().get(backend).device_type() == DeviceType::cuda;
  const nn::safetensors::Contents w = nn::safetensors::load(weights);
  const Tensor tokens = nn::safetensors::load(data).tensors.at(0).second;
  STRATA_CHECK(tokens.dim() == 3 && tokens.dtype() == DType::i64, data,
               ": 'tokens' must be i64 [steps, B, T+1], not ", tokens.str());
  const int64_t steps = tokens.size(0), T = tokens.size(2) - 1;
  json res = {{"backend", backend}, {"steps", steps}, {"lr", o.lr}, {"weight_decay", o.wd}, {"modes", json::object()}};
  std::vector<std::vector<double>> losses;
  std::vector<std::string> names;
  for (ops::DispatchMode mode : parse_modes(o.modes, cuda)) {
    auto model = make(o, mode, backend);
    model->load_state_dict(w.tensors);
    auto opt = model->make_optimizer(bench::gpt_adamw(o.lr, o.wd));
    std::vector<double> l;  // each an f32 loss, exactly
    for (int64_t s = 0; s < steps; ++s) {
      const Tensor b = tokens.select(0, s);
      const Tensor x = b.narrow(1, 0, T).contiguous(), y = b.narrow(1, 1, T).contiguous();
      l.push_back(model->train_step(x, y, *opt).loss.item());
    }
    names.emplace_back(ops::dispatch_mode_name(mode));
    res["modes"][names.back()] = l;
    std::printf("strata %s %s: loss %.6f -> %.6f over %lld steps\n", backend.c_str(), names.back().c_str(), l.front(),
                l.back(), static_cast<long long>(steps));
    losses.push_back(std::move(l));
  }
  for (size_t i = 1; i < losses.size(); ++i)
    for (size_t s = 0; s < losses[i].size(); ++s)
      STRATA_CHECK(losses[i][s] == losses[0][s], names[i],
                   " mode's loss at step ", s, " (", losses[i][s], ") is not bitwise ", names[0], "'s (", losses[0][s],
                   ")");
  std::printf("strata: the %zu modes' losses are bitwise alike at every step\n", losses.size());
  std::ofstream(out) << res.dump(1) << "\n";
  return 0;
}

// One step of a virtual-mode model under the op trace with every op waited for: each op's
// own device time plus its host time, serialised (where a slow step's time goes).
json profile_step(const Common& o, const std::string& backend, backends::Backend& be, const Tensor& x, const Tensor& y) {
  manual_seed(2);
  auto model = make(o, ops::DispatchMode::virtual_call, backend);
  auto opt = model->make_optimizer(bench::gpt_adamw(o.lr, o.wd));
  model->train_step(x, y, *opt);
  be.synchronize();
  ops::take_trace();
  ops::set_trace_sync(true);
  ops::set_trace_enabled(true);
  const auto t0 = std::chrono::steady_clock::now();
  model->train_step(x, y, *opt);
  be.synchronize();
  const double step_ms = ms_since(t0);
  ops::set_trace_enabled(false);
  ops::set_trace_sync(false);
  json t = bench::summarize_trace(ops::take_trace());
  t["step_ms_serialised"] = step_ms;
  return t;
}

// Which of the cuda backend's attention paths the calls so far took (the cuDNN fused engine,
// cuBLAS GEMMs, strata's row kernels); null elsewhere.
json attention_paths(bool cuda) {
#ifdef STRATA_HAVE_BACKEND_CUDA
  if (cuda) {
    const auto c = backends::cuda::attention_path_counts();
    return {{"cudnn", c.cudnn}, {"gemm", c.gemm}, {"own_kernels", c.own_kernels}};
  }
#else
  (void)cuda;
#endif
  return nullptr;
}

int speed(const Common& o, int64_t batch, int64_t seq, int steps, int rounds, int warmup, bool profile,
          bool cudnn_attention) {
  const std::string backend = o.backend.empty() ? std::string(backends::registry().best()) : o.backend;
  backends::Backend& be = backends::registry().get(backend);
  const bool cuda = be.device_type() == DeviceType::cuda;
  const std::vector<ops::DispatchMode> modes = parse_modes(o.modes, cuda);
#ifdef STRATA_HAVE_BACKEND_CUDA
  if (cuda) backends::registry().impl<backends::CudaBackend>().set_cudnn_attention(cudnn_attention);
#endif
  STRATA_CHECK(cuda || cudnn_attention, "--no-cudnn-attention is a cuda backend setting");
  STRATA_CHECK(seq <= o.c.block_size, "--seq ", seq, " is longer than --block ", o.c.block_size);
  struct Run {
    std::string name;
    std::unique_ptr<nn::Model> model;
    std::unique_ptr<nn::Optimizer> opt;
    std::vector<double> ms;
    size_t peak = 0;
    double last_loss = 0;
    json paths;  // attention paths of the warm-up steps (a graph's replays run no host code)
  };
  std::vector<Run> runs;
  manual_seed(1);
  const Tensor x = randint(0, o.c.vocab_size, {batch, seq}, DType::i64), y = randint(0, o.c.vocab_size, {batch, seq}, DType::i64);
  Allocator& alloc = allocator_for(be.device_type() == DeviceType::cuda ? Device::cuda(0) : Device::cpu());
  for (ops::DispatchMode mode : modes) {
    // Every mode from the same initial weights; its peak counts what it allocates itself
    // (parameters, optimizer state, activations), not the models of the modes before it.
    manual_seed(2);
    const size_t held_before = alloc.stats().current_bytes;
    alloc.reset_peak();
    Run r{std::string(ops::dispatch_mode_name(mode)), make(o, mode, backend), nullptr, {}, 0, 0, nullptr};
    r.opt = r.model->make_optimizer(bench::gpt_adamw(o.lr, o.wd));
    const json paths_before = attention_paths(cuda);
    for (int i = 0; i < warmup; ++i) r.model->train_step(x, y, *r.opt);
    if (const json after = attention_paths(cuda); !after.is_null())
      for (const auto& [k, v] : after.items()) r.paths[k] = v.get<int64_t>() - paths_before[k].get<int64_t>();
    be.synchronize();
    r.peak = alloc.stats().peak_bytes - held_before;
    runs.push_back(std::move(r));
  }
  for (int round = 0; round < rounds; ++round)
    for (size_t k = 0; k < runs.size(); ++k) {
      Run& r = runs[round % 2 == 0 ? k : runs.size() - 1 - k];
      be.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      Tensor loss;
      for (int i = 0; i < steps; ++i) loss = r.model->train_step(x, y, *r.opt).loss;
      be.synchronize();
      r.ms.push_back(ms_since(t0) / steps);
      r.last_loss = loss.item();
    }
  const double C = static_cast<double>(o.c.n_embd), L = static_cast<double>(o.c.n_layer);
  // nanoGPT's count: parameters without the position embeddings (N), 6N + 6·L·C·T per token.
  const double N = L * 12.0 * C * C + static_cast<double>(o.c.vocab_size) * C;
  const double flops_per_token = 6.0 * N + 6.0 * L * C * static_cast<double>(seq);
  for (Run& r : runs) {
    std::sort(r.ms.begin(), r.ms.end());
    const double med = r.ms[r.ms.size() / 2];
    const double tok_s = static_cast<double>(batch * seq) * 1e3 / med;
    json j = {{"framework", "strata"}, {"mode", r.name}, {"backend", backend}, {"precision", o.precision},
              {"batch", batch}, {"seq", seq}, {"ms_per_step", med}, {"ms_range", {r.ms.front(), r.ms.back()}},
              {"tokens_per_s", tok_s}, {"tflops", tok_s * flops_per_token / 1e12}, {"peak_mib", r.peak / 1048576.0},
              {"last_loss", r.last_loss}, {"rounds", rounds}, {"steps_per_round", steps},
              {"warmup_attention_paths", r.paths}};
    std::printf("%s\n", j.dump().c_str());
  }
  if (profile) {
    runs.clear();
    const json t = profile_step(o, backend, be, x, y);
    std::printf("strata profile (one virtual-mode step, every op synchronised): %.1f ms, %d ops\n",
                t["step_ms_serialised"].get<double>(), t["ops"].get<int>());
    for (const json& r : t["by_op"])
      std::printf("  %-22s %6lld calls %10.1f ms %9.1f us each\n", r["op"].get<std::string>().c_str(),
                  static_cast<long long>(r["count"].get<int64_t>()), r["total_us"].get<double>() / 1e3,
                  r["mean_us"].get<double>());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"GPT training through nn::Model beside PyTorch (bench/peers/pytorch_gpt2_train.py)"};
  app.require_subcommand(1);
  Common o;
  std::string weights, data, out;
  CLI::App* c = app.add_subcommand("curve", "train from given weights on given batches; every mode's losses");
  add_common(*c, o);
  c->add_option("--weights", weights, "safetensors of the initial parameters, nanoGPT's names")->required();
  c->add_option("--data", data, "safetensors holding 'tokens', i64 [steps, B, T+1]")->required();
  c->add_option("--out", out, "JSON file for the losses")->required();
  int64_t batch = 16, seq = 1024;
  int steps = 10, rounds = 3, warmup = 3;
  bool profile = false, no_cudnn_attention = false;
  CLI::App* s = app.add_subcommand("speed", "step time, tokens/s and peak memory on random tokens");
  add_common(*s, o);
  s->add_option("--batch", batch)->check(CLI::Range(1, 4096));
  s->add_option("--seq", seq)->check(CLI::Range(1, 1 << 20));
  s->add_option("--steps", steps, "timed steps per round")->check(CLI::Range(1, 100000));
  s->add_option("--rounds", rounds)->check(CLI::Range(1, 100));
  s->add_option("--warmup", warmup)->check(CLI::Range(1, 1000));
  s->add_flag("--no-cudnn-attention", no_cudnn_attention,
              "cuda: f16/bf16 attention as cuBLAS GEMMs instead of cuDNN's fused engine (A/B timing)");
  s->add_flag("--profile", profile, "then one virtual-mode step with every op timed alone (the op trace)");
  STRATA_CLI11_PARSE(app, argc, argv);
  if (*c) return curve(o, weights, data, out);
  return speed(o, batch, seq, steps, rounds, warmup, profile, !no_cudnn_attention);
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpt2_train: %s\n", e.what());
  return 1;
}
