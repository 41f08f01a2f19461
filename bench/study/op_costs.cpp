// study_resnet50 op-costs: what each op of one ResNet-50 step costs on the host and
// on the device.
//  - idle: every backend call of one step is made with nothing queued ahead of it.
//    A decorator backend (registered beside the real one and used in virtual mode)
//    holds the stream behind a host-function gate (stream_gate.h), times the call's enqueue with
//    steady_clock, then opens the gate: CUDA events around the call then measure its
//    kernels back to back, free of host gaps. On a CPU backend both are the call's
//    duration.
//  - busy: the op trace (ops/trace.h) of one ordinary step in the virtual and static
//    modes: host time inside the backend while the queue is full, as a step really
//    runs; plus that step's enqueue and device time.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "driver.h"
#include "strata/nn/nn.h"
#include "resnet50_support.h"
#include "stream_gate.h"

namespace strata::study {

namespace {

using namespace ::strata::ops;  // NOLINT: the op table's OpId and argument types

struct OpCost {
  OpId op;
  double host_us, device_us;
};

class OpCostBackend final : public backends::Backend {
 public:
  OpCostBackend(backends::Backend& inner, std::string name, void* stream)
      : inner_(inner), name_(std::move(name)), stream_(static_cast<cudaStream_t>(stream)), gate_(stream) {
    if (stream_ != nullptr) {
      bench::cuda_check(cudaEventCreate(&start_), "cudaEventCreate");
      bench::cuda_check(cudaEventCreate(&end_), "cudaEventCreate");
    }
  }
  std::string_view name() const override { return name_; }
  DeviceType device_type() const override { return inner_.device_type(); }
  const backends::Capabilities& capabilities() const override { return inner_.capabilities(); }
  std::string describe() const override { return inner_.describe(); }
  void set_allow_tf32(bool on) override { inner_.set_allow_tf32(on); }
  MemoryFormat preferred_memory_format(DType compute) const override { return inner_.preferred_memory_format(compute); }
  void synchronize() override { inner_.synchronize(); }
#define STRATA_OP(op_name_, Args, kind) \
  void op_name_(const Args& a) override { call(OpId::op_name_, [&] { inner_.op_name_(a); }); }
#include "strata/ops/table/op_table.def"
#undef STRATA_OP

  bool enabled = false;
  std::vector<OpCost> costs;
  int gate_timeouts() const { return gate_.timeouts(); }

 private:
  template <class F>
  void call(OpId op, F&& f) {
    if (!enabled) return f();
    using Clock = std::chrono::steady_clock;
    inner_.synchronize();
    if (stream_ == nullptr) {
      const auto t0 = Clock::now();
      f();
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      costs.push_back({op, us, us});
      return;
    }
    gate_.hold();
    bench::cuda_check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    const auto t0 = Clock::now();
    f();
    const double host_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    bench::cuda_check(cudaEventRecord(end_, stream_), "cudaEventRecord");
    gate_.open();
    bench::cuda_check(cudaEventSynchronize(end_), "cudaEventSynchronize");
    float ms = 0;
    bench::cuda_check(cudaEventElapsedTime(&ms, start_, end_), "cudaEventElapsedTime");
    costs.push_back({op, host_us, static_cast<double>(ms) * 1e3});
  }

  backends::Backend& inner_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  bench::StreamGate gate_;
};

struct Setup {
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<nn::Optimizer> opt;
  Tensor x, labels;
};

Setup make_setup(const Options& o, Point p, bool train, ops::DispatchMode mode, const std::string& backend) {
  Setup s;
  s.model = bench::make_resnet50(mode, backend);
  s.x = s.model->input_buffer(Shape{p.batch, 3, p.resolution, p.resolution});
  copy_into(bench::random_images(p.batch, p.resolution, MemoryFormat::contiguous, o.seed), s.x);
  s.labels = s.model->targets_buffer(Shape{p.batch});
  copy_into(bench::random_labels(p.batch, o.seed + 1), s.labels);
  if (train) {
    s.model->train();
    s.opt = s.model->make_optimizer(bench::sgd_config(o.lr));
  } else {
    s.model->eval();
  }
  return s;
}

json idle_costs(const Options& o, Point p, bool train, OpCostBackend& oc) {
  Setup s = make_setup(o, p, train, ops::DispatchMode::virtual_call, std::string(oc.name()));
  const bench::Step step = bench::make_step(*s.model, s.x, s.labels, s.opt.get());
  for (int i = 0; i < std::max(1, o.warmup); ++i) step(false);
  oc.synchronize();
  oc.costs.clear();
  oc.enabled = true;
  step(false);
  oc.enabled = false;
  oc.synchronize();
  std::map<std::string_view, std::array<double, 3>> by;  // count, host, device
  double host = 0, device = 0;
  for (const OpCost& c : oc.costs) {
    auto& a = by[op_name(c.op)];
    a[0] += 1;
    a[1] += c.host_us;
    a[2] += c.device_us;
    host += c.host_us;
    device += c.device_us;
  }
  json ops = json::array();
  for (const auto& [name, a] : by)
    ops.push_back({{"op", std::string(name)}, {"count", a[0]}, {"host_us", a[1]}, {"device_us", a[2]},
                   {"host_us_mean", a[1] / a[0]}, {"device_us_mean", a[2] / a[0]}});
  return {{"ops", oc.costs.size()}, {"host_us", host}, {"device_us", device}, {"by_op", ops},
          {"gate_timeouts", oc.gate_timeouts()}};
}

json busy_trace(const Options& o, Point p, bool train, ops::DispatchMode mode) {
  backends::Backend& be = backends::registry().get(o.backend);
  const bool cuda = be.device_type() == DeviceType::cuda;
  Setup s = make_setup(o, p, train, mode, o.backend);
  const bench::Step step = bench::make_step(*s.model, s.x, s.labels, s.opt.get());
  for (int i = 0; i < std::max(1, o.warmup); ++i) step(false);
  be.synchronize();
  bench::StepTimer timer(cuda, cuda ? backends::registry().impl<backends::CudaBackend>().stream() : nullptr, be);
  (void)ops::take_trace();
  ops::set_trace_enabled(true);
  timer.begin();
  step(false);
  timer.enqueued();
  ops::set_trace_enabled(false);
  const auto [dev, host, wall] = timer.finish();
  json t = bench::summarize_trace(ops::take_trace());
  t["step_device_ms"] = dev;
  t["step_host_ms"] = host;
  t["step_wall_ms"] = wall;
  return t;
}

}  // namespace

int run_op_costs(const Options& o, Point p, const std::vector<std::string>& kinds) {
  backends::Backend& be = backends::registry().get(o.backend);
  const bool cuda = be.device_type() == DeviceType::cuda;
  const std::string name = o.backend + "+opcost";
  if (backends::registry().find(name) == nullptr)
    backends::registry().add(std::make_unique<OpCostBackend>(
        be, name, cuda ? backends::registry().impl<backends::CudaBackend>().stream() : nullptr));
  auto& oc = dynamic_cast<OpCostBackend&>(backends::registry().get(name));
  json doc = {{"study", 1},
              {"framework", "strata"},
              {"part", "op_costs"},
              {"device", bench::device_info(cuda)},
              {"backend", o.backend},
              {"batch", p.batch},
              {"resolution", p.resolution},
              {"records", json::array()}};
  for (const auto& kind : kinds) {
    const bool train = kind == "train";
    json r = {{"kind", kind}, {"batch", p.batch}, {"resolution", p.resolution}};
    try {
      r["idle"] = idle_costs(o, p, train, oc);
      for (auto mode : {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call})
        r["busy"][std::string(ops::dispatch_mode_name(mode))] = busy_trace(o, p, train, mode);
      r["status"] = "ok";
      const json& idle = r["idle"];
      const json& busy = r["busy"]["virtual"];
      std::printf("op-costs %-5s %lldx%lld: %zu backend calls; device idle: host %.0f us, device %.0f us; "
                  "ordinary step: enqueue %.3f ms (%.0f us inside the backend), device %.3f ms\n",
                  kind.c_str(), static_cast<long long>(p.batch), static_cast<long long>(p.resolution),
                  idle["ops"].get<size_t>(), idle["host_us"].get<double>(), idle["device_us"].get<double>(),
                  busy["step_host_ms"].get<double>(), busy["backend_host_us"].get<double>(),
                  busy["step_device_ms"].get<double>());
    } catch (const std::exception& e) {
      r["status"] = is_oom(e.what()) ? "oom" : "error";
      r["note"] = e.what();
      ops::set_trace_enabled(false);
      oc.enabled = false;
      if (cuda) (void)cudaGetLastError();
      std::printf("op-costs %-5s %s\n", kind.c_str(), e.what());
    }
    doc["records"].push_back(r);
    write_json(o.json_path, doc);
  }
  return exit_status(doc["records"], "op-costs");
}

}  // namespace strata::study
