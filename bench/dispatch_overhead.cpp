// ns per call of a tiny op through each layer of strata, so that the table
// separates dispatch cost, per-call generic work and library cost:
//   plain_loop            the arithmetic alone, inlined
//   backend_member        Impl::op(args) on a prepared args struct (what direct mode runs)
//   direct_plan           a planned op (ops/direct), i.e. the above through a plan object
//   frontend_static       ops::relu(StaticDispatch<Impl>): checks + output allocation + call
//   frontend_virtual      ops::relu(VirtualDispatch):   the same + one virtual call
//   autograd_virtual      autograd::relu with an input that requires grad: + tape node
// plus the pure indirection (virtual vs template vs direct call of one function), for
// relu on 64 floats, add on 1 element and a 3x3 convolution on a tiny input
// ([1,4,8,8] * [4,4,3,3]). Run for every backend built and usable here. On the cuda
// backend a call only enqueues work: its ns per call is the host's enqueue cost, with
// the queue drained every 256 calls outside the timing (no back-pressure).
// The Backend& comes from the registry at run time and is laundered through
// benchmark::DoNotOptimize, so the compiler cannot devirtualise the call.
//
// `--paired [--paired-rounds N] [--paired-json FILE]` measures instead what each layer costs as the
// difference of two paths of the same op and shape (virtual − static front end, static
// front end − direct plan, tape − front end, and on a backend that captures graphs
// direct plan − graph replay, the price of launching at all), in interleaved rounds:
// each round times a batch of calls of one path and then of the other (the order
// alternating), and the table gives the median of the rounds' differences with a 95 %
// confidence interval (order statistics of the median), "within noise" where it spans 0.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "strata/autograd/functions.h"
#include "strata/backends/api/registry.h"
#include "strata/core/exit_status.h"
#include "strata/core/version.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/direct/plans.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"
#include "strata/backends/static_backends.h"

using namespace strata;

namespace {

Tensor filled(const Shape& s, float v, Device d = Device::cpu()) {
  std::vector<float> data(static_cast<size_t>(s.numel()), v);
  for (size_t i = 0; i < data.size(); ++i) data[i] = v * (i % 2 ? 1.f : -1.f);
  Tensor host = Tensor::from_vector(data, s);
  if (d.is_cpu()) return host;
  Tensor t = Tensor::empty(s, DType::f32, d);
  copy_into(host, t);
  return t;
}

// Runs `call` once per iteration. On a device backend, every 256 calls the queued
// work is waited for outside the timing, so the host never blocks on a full launch
// queue and the time is the enqueue cost alone (CPU backends return when done).
template <class Impl, class F>
void timed_loop(benchmark::State& st, F&& call) {
  Impl& impl = backends::registry().impl<Impl>();
  int n = 0;
  for (auto _ : st) {
    call();
    benchmark::ClobberMemory();
    if constexpr (Impl::kDevice != DeviceType::cpu) {
      if (++n % 256 == 0) {
        st.PauseTiming();
        impl.synchronize();
        st.ResumeTiming();
      }
    }
  }
  impl.synchronize();
}

template <class Impl>
Device device_of() {
  return Device{Impl::kDevice, 0};
}

// --- pure indirection -------------------------------------------------------
struct Adder {
  virtual ~Adder() = default;
  virtual float call(float a, float b) const;
};
float Adder::call(float a, float b) const { return a + b; }
struct FinalAdder {
  float call(float a, float b) const { return a + b; }
};
__attribute__((noinline)) float add_noinline(float a, float b) { return a + b; }

void BM_indirection_virtual(benchmark::State& st) {
  std::unique_ptr<Adder> a = std::make_unique<Adder>();
  Adder* p = a.get();
  benchmark::DoNotOptimize(p);
  float acc = 0;
  for (auto _ : st) {
    acc = p->call(acc, 1.0f);
    benchmark::DoNotOptimize(acc);
  }
}
template <class T>
void BM_indirection_template(benchmark::State& st) {
  T t;
  float acc = 0;
  for (auto _ : st) {
    acc = t.call(acc, 1.0f);
    benchmark::DoNotOptimize(acc);
  }
}
void BM_indirection_direct_noinline(benchmark::State& st) {
  float acc = 0;
  for (auto _ : st) {
    acc = add_noinline(acc, 1.0f);
    benchmark::DoNotOptimize(acc);
  }
}
BENCHMARK(BM_indirection_virtual);
BENCHMARK(BM_indirection_template<FinalAdder>)->Name("BM_indirection_template");
BENCHMARK(BM_indirection_direct_noinline);

// --- tiny ops ---------------------------------------------------------------
void BM_plain_loop_relu64(benchmark::State& st) {
  Tensor x = filled({64}, 0.5f), y = Tensor::empty({64});
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (auto _ : st) {
    for (int i = 0; i < 64; ++i) yp[i] = xp[i] > 0 ? xp[i] : 0;
    benchmark::DoNotOptimize(yp);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_plain_loop_relu64);

void BM_plain_loop_add1(benchmark::State& st) {
  Tensor a = filled({1}, 1.f), b = filled({1}, 2.f), y = Tensor::empty({1});
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  for (auto _ : st) {
    yp[0] = ap[0] + bp[0];
    benchmark::DoNotOptimize(yp);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_plain_loop_add1);

template <class Impl>
void BM_backend_member_relu64(benchmark::State& st) {
  auto& impl = backends::registry().impl<Impl>();
  Tensor x = filled({64}, 0.5f, device_of<Impl>()), y = Tensor::empty({64}, DType::f32, device_of<Impl>());
  const ops::ReluFwdArgs args{x, y};
  timed_loop<Impl>(st, [&] { impl.relu_fwd(args); });
}

template <class Impl>
void BM_direct_plan_relu64(benchmark::State& st) {
  const Tensor x = filled({64}, 0.5f, device_of<Impl>());  // a plan binds its input by pointer
  ops::direct::ReluPlan<Impl> plan;
  plan.plan(backends::registry().impl<Impl>(), x);
  timed_loop<Impl>(st, [&] { plan.forward(); });
}

// The front end (and the tape) through static or virtual dispatch; `grad` makes the
// input require a gradient, so autograd:: records a node.
template <class Impl, class D>
D dispatcher() {
  if constexpr (std::is_same_v<D, ops::VirtualDispatch>) {
    backends::Backend* b = &backends::registry().get(Impl::kName);
    benchmark::DoNotOptimize(b);  // no devirtualisation
    return ops::VirtualDispatch(*b);
  } else {
    return D(backends::registry().impl<Impl>());
  }
}

template <class Impl, class D>
void BM_frontend_relu64(benchmark::State& st) {
  const D d = dispatcher<Impl, D>();
  Tensor x = filled({64}, 0.5f, device_of<Impl>());
  timed_loop<Impl>(st, [&] { benchmark::DoNotOptimize(ops::relu(d, x)); });
}

template <class Impl, class D>
void BM_autograd_relu64(benchmark::State& st) {
  const D d = dispatcher<Impl, D>();
  Tensor x = filled({64}, 0.5f, device_of<Impl>());
  x.set_requires_grad(true);
  timed_loop<Impl>(st, [&] { benchmark::DoNotOptimize(autograd::relu(d, x)); });
}

template <class Impl>
void BM_backend_member_add1(benchmark::State& st) {
  auto& impl = backends::registry().impl<Impl>();
  const Device dev = device_of<Impl>();
  Tensor a = filled({1}, 1.f, dev), b = filled({1}, 2.f, dev), y = Tensor::empty({1}, DType::f32, dev);
  const ops::AddArgs args{a, b, y};
  timed_loop<Impl>(st, [&] { impl.add(args); });
}

template <class Impl, class D>
void BM_frontend_add1(benchmark::State& st) {
  const D d = dispatcher<Impl, D>();
  Tensor a = filled({1}, 1.f, device_of<Impl>()), b = filled({1}, 2.f, device_of<Impl>());
  timed_loop<Impl>(st, [&] { benchmark::DoNotOptimize(ops::add(d, a, b)); });
}

// --- a tiny convolution: [1,4,8,8] * [4,4,3,3], padding 1 ---------------------------
struct TinyConv {
  Tensor x, w;
  ops::Conv2dParams p;
  explicit TinyConv(Device d) : x(filled({1, 4, 8, 8}, 0.5f, d)), w(filled({4, 4, 3, 3}, 0.1f, d)) {
    p.pad_h = p.pad_w = 1;
  }
};

template <class Impl>
void BM_backend_member_conv(benchmark::State& st) {
  auto& impl = backends::registry().impl<Impl>();
  TinyConv c(device_of<Impl>());
  Tensor y = Tensor::empty({1, 4, 8, 8}, DType::f32, device_of<Impl>());
  const ops::Conv2dFwdArgs args{c.x, c.w, Tensor(), y, c.p};
  timed_loop<Impl>(st, [&] { impl.conv2d_fwd(args); });
}

template <class Impl>
void BM_direct_plan_conv(benchmark::State& st) {
  TinyConv c(device_of<Impl>());
  ops::direct::Conv2dPlan<Impl> plan;
  plan.plan(backends::registry().impl<Impl>(), c.x, c.w, Tensor(), c.p);
  timed_loop<Impl>(st, [&] { plan.forward(); });
}

template <class Impl, class D>
void BM_frontend_conv(benchmark::State& st) {
  const D d = dispatcher<Impl, D>();
  TinyConv c(device_of<Impl>());
  timed_loop<Impl>(st, [&] { benchmark::DoNotOptimize(ops::conv2d(d, c.x, c.w, Tensor(), c.p)); });
}

template <class Impl>
void register_backend_benchmarks() {
  const std::string n(Impl::kName);
  if (backends::registry().find(n) == nullptr) return;  // not built, or no GPU here
  using S = ops::StaticDispatch<Impl>;
  using V = ops::VirtualDispatch;
  const std::pair<const char*, void (*)(benchmark::State&)> benches[] = {
      {"relu64/backend_member", BM_backend_member_relu64<Impl>},
      {"relu64/direct_plan", BM_direct_plan_relu64<Impl>},
      {"relu64/frontend_static", BM_frontend_relu64<Impl, S>},
      {"relu64/frontend_virtual", BM_frontend_relu64<Impl, V>},
      {"relu64/autograd_static", BM_autograd_relu64<Impl, S>},
      {"relu64/autograd_virtual", BM_autograd_relu64<Impl, V>},
      {"add1/backend_member", BM_backend_member_add1<Impl>},
      {"add1/frontend_static", BM_frontend_add1<Impl, S>},
      {"add1/frontend_virtual", BM_frontend_add1<Impl, V>},
      {"conv3x3/backend_member", BM_backend_member_conv<Impl>},
      {"conv3x3/direct_plan", BM_direct_plan_conv<Impl>},
      {"conv3x3/frontend_static", BM_frontend_conv<Impl, S>},
      {"conv3x3/frontend_virtual", BM_frontend_conv<Impl, V>},
  };
  for (const auto& [what, fn] : benches) {
    const std::string w(what);
    const auto slash = w.find('/');
    // "<op>/<backend>/<path>", the names docs/dispatch_overhead.md and tools/study read.
    benchmark::RegisterBenchmark((w.substr(0, slash) + "/" + n + w.substr(slash)).c_str(), fn);
  }
}

// --- paired: a layer's cost as the difference of two paths, interleaved -------------
struct PairedResult {
  std::string op, backend, layer;
  double median_ns, lo_ns, hi_ns;
  int rounds;
};

// ns per call of `call` over a batch of n calls; a device backend's queue is drained
// before and after, outside the timing (the time is the enqueue cost, as in timed_loop).
template <class Impl>
double batch_ns(Impl& impl, const std::function<void()>& call, int n) {
  impl.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) call();
  const auto t1 = std::chrono::steady_clock::now();
  impl.synchronize();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

// The median of a − b over `rounds` interleaved rounds and its 95 % confidence interval:
// the ranks n/2 ∓ 1.96·√n/2 of the sorted differences (distribution-free).
template <class Impl>
PairedResult paired(Impl& impl, const std::string& op, const std::string& layer, const std::function<void()>& a,
                    const std::function<void()>& b, int rounds, int calls) {
  for (int i = 0; i < 3; ++i) batch_ns(impl, a, calls), batch_ns(impl, b, calls);  // warm caches and plans
  std::vector<double> d;
  for (int r = 0; r < rounds; ++r) {
    const bool a_first = r % 2 == 0;
    const double first = batch_ns(impl, a_first ? a : b, calls);
    const double second = batch_ns(impl, a_first ? b : a, calls);
    d.push_back(a_first ? first - second : second - first);
  }
  std::sort(d.begin(), d.end());
  const double n = static_cast<double>(d.size()), half = 1.96 * std::sqrt(n) / 2;
  const auto rank = [&](double x) { return static_cast<size_t>(std::clamp(x, 0.0, n - 1)); };
  return {op, std::string(Impl::kName), layer, d[d.size() / 2], d[rank(std::floor(n / 2 - half))],
          d[rank(std::ceil(n / 2 + half))], rounds};
}

template <class Impl>
void paired_backend(std::vector<PairedResult>& out, int rounds) {
  if (backends::registry().find(std::string(Impl::kName)) == nullptr) return;
  Impl& impl = backends::registry().impl<Impl>();
  const Device dev = device_of<Impl>();
  const bool device = Impl::kDevice != DeviceType::cpu;
  const int calls = device ? 256 : 2048;  // a device's queue stays short of back-pressure
  using S = ops::StaticDispatch<Impl>;
  const S st = dispatcher<Impl, S>();
  const ops::VirtualDispatch vd = dispatcher<Impl, ops::VirtualDispatch>();

  const Tensor x = filled({64}, 0.5f, dev);
  Tensor xg = filled({64}, 0.5f, dev);
  xg.set_requires_grad(true);
  ops::direct::ReluPlan<Impl> relu;
  relu.plan(impl, x);
  const auto relu_v = [&] { benchmark::DoNotOptimize(ops::relu(vd, x)); };
  const auto relu_s = [&] { benchmark::DoNotOptimize(ops::relu(st, x)); };
  const auto relu_d = [&] { relu.forward(); };
  out.push_back(paired(impl, "relu64", "virtual call (virtual − static)", relu_v, relu_s, rounds, calls));
  out.push_back(paired(impl, "relu64", "front end (static − direct plan)", relu_s, relu_d, rounds, calls));
  out.push_back(paired(impl, "relu64", "autograd tape (autograd − front end, static)",
                       [&] { benchmark::DoNotOptimize(autograd::relu(st, xg)); }, relu_s, rounds, calls));

  const Tensor a = filled({1}, 1.f, dev), b = filled({1}, 2.f, dev);
  out.push_back(paired(impl, "add1", "virtual call (virtual − static)",
                       [&] { benchmark::DoNotOptimize(ops::add(vd, a, b)); },
                       [&] { benchmark::DoNotOptimize(ops::add(st, a, b)); }, rounds, calls));

  TinyConv c(dev);
  ops::direct::Conv2dPlan<Impl> conv;
  conv.plan(impl, c.x, c.w, Tensor(), c.p);
  const auto conv_v = [&] { benchmark::DoNotOptimize(ops::conv2d(vd, c.x, c.w, Tensor(), c.p)); };
  const auto conv_s = [&] { benchmark::DoNotOptimize(ops::conv2d(st, c.x, c.w, Tensor(), c.p)); };
  const auto conv_d = [&] { conv.forward(); };
  out.push_back(paired(impl, "conv3x3", "virtual call (virtual − static)", conv_v, conv_s, rounds, calls));
  out.push_back(paired(impl, "conv3x3", "front end (static − direct plan)", conv_s, conv_d, rounds, calls));

  if constexpr (ops::direct::CapturesGraphs<Impl>) {
    // One graph of `calls` planned calls, launched once per batch: per call, its share.
    for (const auto& [op, fn] : {std::pair<std::string, std::function<void()>>{"relu64", relu_d}, {"conv3x3", conv_d}}) {
      auto graph = ops::direct::capture_step(impl, [&] {
        for (int i = 0; i < calls; ++i) fn();
      });
      int k = 0;
      const auto replay = [&] {  // batch_ns calls it `calls` times: one launch per batch
        if (k++ % calls == 0) graph->launch();
      };
      out.push_back(paired(impl, op, "launch (direct plan − graph replay)", fn, replay, rounds, calls));
    }
  }
}

// {"paired": [{op, backend, layer, median_ns, lo_ns, hi_ns, rounds}]}, for
// tools/study/make_page.py.
void write_paired_json(const std::vector<PairedResult>& out, const std::string& path) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : out)
    rows.push_back({{"op", r.op}, {"backend", r.backend}, {"layer", r.layer}, {"median_ns", r.median_ns},
                    {"lo_ns", r.lo_ns}, {"hi_ns", r.hi_ns}, {"rounds", r.rounds}});
  std::ofstream f(path);
  f << nlohmann::json{{"paired", rows}}.dump(1) << "\n";
  if (!f) {
    std::fprintf(stderr, "dispatch_overhead: cannot write %s\n", path.c_str());
    std::exit(kExitFailure);
  }
}

int run_paired(int rounds, const std::string& json_path) {
  std::vector<PairedResult> out;
#define STRATA_PAIRED(Impl) paired_backend<Impl>(out, rounds);
  STRATA_FOR_EACH_BACKEND(STRATA_PAIRED)
#undef STRATA_PAIRED
  std::printf("%-8s %-10s %-46s %12s  %s\n", "op", "backend", "layer", "median ns", "95% interval of the median");
  for (const auto& r : out) {
    const bool noise = r.lo_ns <= 0 && r.hi_ns >= 0;
    char verdict[96];
    if (noise)
      std::snprintf(verdict, sizeof verdict, "within noise (±%.0f ns)", std::max(-r.lo_ns, r.hi_ns));
    else
      std::snprintf(verdict, sizeof verdict, "[%.0f, %.0f]", r.lo_ns, r.hi_ns);
    std::printf("%-8s %-10s %-46s %12.0f  %s\n", r.op.c_str(), r.backend.c_str(), r.layer.c_str(), r.median_ns,
                verdict);
  }
  std::printf("(%d interleaved rounds per row; ns per call)\n", out.empty() ? 0 : out.front().rounds);
  if (!json_path.empty()) write_paired_json(out, json_path);
  return kExitSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  bool paired_mode = false;
  int rounds = 41;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--paired") == 0) paired_mode = true;
    if (std::strcmp(argv[i], "--paired-rounds") == 0 && i + 1 < argc) rounds = std::max(5, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--paired-json") == 0 && i + 1 < argc) json_path = argv[i + 1];
  }
  if (paired_mode) return run_paired(rounds, json_path);
#define STRATA_REGISTER(Impl) register_backend_benchmarks<Impl>();
  STRATA_FOR_EACH_BACKEND(STRATA_REGISTER)
#undef STRATA_REGISTER
  if (print_version_if_asked(argc, argv, "dispatch_overhead")) return kExitSuccess;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return kExitUsage;
  benchmark::AddCustomContext("backends", backends::registry().describe());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
