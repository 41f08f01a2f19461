// ns per call of a tiny op through each layer of strata, so that the table
// separates dispatch cost, per-call generic work and library cost:
//   plain_loop            the arithmetic alone, inlined
//   backend_member        Impl::op(args) on a prepared args struct (what direct mode runs)
//   direct_plan           a planned op (ops/direct), i.e. the above through a plan object
//   frontend_static       ops::relu(StaticDispatch<Impl>): checks + output allocation + call
//   frontend_virtual      ops::relu(VirtualDispatch):   the same + one virtual call
//   autograd_virtual      autograd::relu with an input that requires grad: + tape node
// plus the pure indirection (virtual vs template vs direct call of one function).
// Run for the reference and null backends (and any other CPU backend built).
// The Backend& comes from the registry at run time and is laundered through
// benchmark::DoNotOptimize, so the compiler cannot devirtualise the call.
#include <benchmark/benchmark.h>

#include "autograd/functions.h"
#include "backends/api/registry.h"
#include "ops/direct/plans.h"
#include "ops/dispatch.h"
#include "strata_generated/static_backends.h"

using namespace strata;

namespace {

Tensor filled(const Shape& s, float v) {
  std::vector<float> data(static_cast<size_t>(s.numel()), v);
  for (size_t i = 0; i < data.size(); ++i) data[i] = v * (i % 2 ? 1.f : -1.f);
  return Tensor::from_vector(data, s);
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
  Tensor x = filled({64}, 0.5f), y = Tensor::empty({64});
  const ops::ReluFwdArgs args{x, y};
  for (auto _ : st) {
    impl.relu_fwd(args);
    benchmark::ClobberMemory();
  }
}

template <class Impl>
void BM_direct_plan_relu64(benchmark::State& st) {
  auto& impl = backends::registry().impl<Impl>();
  Tensor x = filled({64}, 0.5f);
  ops::direct::ReluPlan<Impl> plan;
  plan.plan(impl, x);
  for (auto _ : st) {
    plan.forward();
    benchmark::ClobberMemory();
  }
}

template <class Impl>
void BM_frontend_static_relu64(benchmark::State& st) {
  ops::StaticDispatch<Impl> d(backends::registry().impl<Impl>());
  Tensor x = filled({64}, 0.5f);
  for (auto _ : st) benchmark::DoNotOptimize(ops::relu(d, x));
}

template <class Impl>
void BM_frontend_virtual_relu64(benchmark::State& st) {
  backends::Backend* b = &backends::registry().get(Impl::kName);
  benchmark::DoNotOptimize(b);
  ops::VirtualDispatch d(*b);
  Tensor x = filled({64}, 0.5f);
  for (auto _ : st) benchmark::DoNotOptimize(ops::relu(d, x));
}

template <class Impl>
void BM_autograd_virtual_relu64(benchmark::State& st) {
  backends::Backend* b = &backends::registry().get(Impl::kName);
  benchmark::DoNotOptimize(b);
  ops::VirtualDispatch d(*b);
  Tensor x = filled({64}, 0.5f);
  x.set_requires_grad(true);
  for (auto _ : st) benchmark::DoNotOptimize(autograd::relu(d, x));
}

template <class Impl>
void BM_autograd_static_relu64(benchmark::State& st) {
  ops::StaticDispatch<Impl> d(backends::registry().impl<Impl>());
  Tensor x = filled({64}, 0.5f);
  x.set_requires_grad(true);
  for (auto _ : st) benchmark::DoNotOptimize(autograd::relu(d, x));
}

template <class Impl>
void BM_backend_member_add1(benchmark::State& st) {
  auto& impl = backends::registry().impl<Impl>();
  Tensor a = filled({1}, 1.f), b = filled({1}, 2.f), y = Tensor::empty({1});
  const ops::AddArgs args{a, b, y};
  for (auto _ : st) {
    impl.add(args);
    benchmark::ClobberMemory();
  }
}

template <class Impl>
void BM_frontend_static_add1(benchmark::State& st) {
  ops::StaticDispatch<Impl> d(backends::registry().impl<Impl>());
  Tensor a = filled({1}, 1.f), b = filled({1}, 2.f);
  for (auto _ : st) benchmark::DoNotOptimize(ops::add(d, a, b));
}

template <class Impl>
void BM_frontend_virtual_add1(benchmark::State& st) {
  backends::Backend* bk = &backends::registry().get(Impl::kName);
  benchmark::DoNotOptimize(bk);
  ops::VirtualDispatch d(*bk);
  Tensor a = filled({1}, 1.f), b = filled({1}, 2.f);
  for (auto _ : st) benchmark::DoNotOptimize(ops::add(d, a, b));
}

template <class Impl>
void register_backend_benchmarks() {
  const std::string n(Impl::kName);
  if (Impl::kDevice != DeviceType::cpu || backends::registry().find(n) == nullptr) return;
  benchmark::RegisterBenchmark(("relu64/" + n + "/backend_member").c_str(), BM_backend_member_relu64<Impl>);
  benchmark::RegisterBenchmark(("relu64/" + n + "/direct_plan").c_str(), BM_direct_plan_relu64<Impl>);
  benchmark::RegisterBenchmark(("relu64/" + n + "/frontend_static").c_str(), BM_frontend_static_relu64<Impl>);
  benchmark::RegisterBenchmark(("relu64/" + n + "/frontend_virtual").c_str(), BM_frontend_virtual_relu64<Impl>);
  benchmark::RegisterBenchmark(("relu64/" + n + "/autograd_static").c_str(), BM_autograd_static_relu64<Impl>);
  benchmark::RegisterBenchmark(("relu64/" + n + "/autograd_virtual").c_str(), BM_autograd_virtual_relu64<Impl>);
  benchmark::RegisterBenchmark(("add1/" + n + "/backend_member").c_str(), BM_backend_member_add1<Impl>);
  benchmark::RegisterBenchmark(("add1/" + n + "/frontend_static").c_str(), BM_frontend_static_add1<Impl>);
  benchmark::RegisterBenchmark(("add1/" + n + "/frontend_virtual").c_str(), BM_frontend_virtual_add1<Impl>);
}

}  // namespace

int main(int argc, char** argv) {
#define STRATA_REGISTER(Impl) register_backend_benchmarks<Impl>();
  STRATA_FOR_EACH_BACKEND(STRATA_REGISTER)
#undef STRATA_REGISTER
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("backends", backends::registry().describe());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
