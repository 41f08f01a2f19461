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
#include <benchmark/benchmark.h>

#include "strata/autograd/functions.h"
#include "strata/backends/api/registry.h"
#include "strata/core/exit_status.h"
#include "strata/core/version.h"
#include "strata/ops/direct/plans.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"
#include "strata/strata_generated/static_backends.h"

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

}  // namespace

int main(int argc, char** argv) {
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
