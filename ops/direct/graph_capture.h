#pragma once
// Graph mode: a planned step captured once into a backend's graph (a CUDA graph) and
// replayed as one submission, without a host call per op. The step's plans and memory
// must already exist (a direct-mode run before the capture): inside the capture nothing
// is planned, allocated, synchronised or read on the host. A kernel call that breaks the
// capture is named in the error (run_kernel asks the backend after each call).
//
// What a layer (or any code a planned step runs) may do in the three passes a step goes
// through in graph mode: recorded (step_memory.h), run for real, captured.
//  - Call kernels only through ops::direct's plans and one-off calls (run_kernel): they are
//    noted while recording, run, or captured, and a capture they break is named.
//  - Plan, allocate and read device values on the host only while recording or running,
//    never while capturing(): the capture replays the plans and buffers of the run before.
//  - Change host state (a gradient handed to .grad(), a counter) only when !recording();
//    while capturing(), register the change with at_each_launch instead, or it happens once.
//  - A kernel argument that must differ at every launch (Dropout's seed and offset) is read
//    from device memory that a before_each_launch writer fills.
// nn/step_graphs.h is the model's side: when it captures, launches and captures again.
#include <concepts>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/error.h"
#include "strata/ops/table/op_id.h"

namespace strata::ops::direct {

// A backend that captures its calls (the cuda backend).
template <class Impl>
concept CapturesGraphs = requires(Impl& i, const Impl& ci) {
  i.begin_capture();
  i.end_capture()->launch();
  { i.end_capture()->stale() } -> std::convertible_to<bool>;
  i.abort_capture();
  { ci.capture_broken() } -> std::convertible_to<bool>;
};

namespace detail {
struct CaptureCheck {
  virtual ~CaptureCheck() = default;
  // After each kernel call of the captured step: throws naming `op` when it broke the capture.
  virtual void after(OpId op) const = 0;
  mutable std::vector<std::function<void()>> before;   // before_each_launch's
  mutable std::vector<std::function<void()>> effects;  // at_each_launch's
};
extern constinit thread_local const CaptureCheck* t_capture;

// One kernel call inside a capture: a failure names the op, and so does a capture it broke.
template <class Call>
void captured_call(OpId op, std::string_view backend, Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    STRATA_FAIL("graph mode: ", op_name(op), " on ", backend, " failed while the step was captured: ", e.what());
  }
  t_capture->after(op);
}
}  // namespace detail

// Whether this thread is capturing a step.
inline bool capturing() { return detail::t_capture != nullptr; }

// Host state a step changes besides its kernels (a batch counter): inside a capture,
// the change is not made now but kept, and made at every launch of the graph.
inline void at_each_launch(std::function<void()> effect) {
  STRATA_CHECK(capturing(), "graph mode: at_each_launch outside a capture");
  detail::t_capture->effects.push_back(std::move(effect));
}

// What a kernel of the step reads from device memory that must change at every launch
// (dropout's random offset): inside a capture, `write` is kept and called before every
// launch of the graph, where it enqueues its writes on the backend's stream.
inline void before_each_launch(std::function<void()> write) {
  STRATA_CHECK(capturing(), "graph mode: before_each_launch outside a capture");
  detail::t_capture->before.push_back(std::move(write));
}

// What a caller keeps of a captured step, whatever its backend's graph type.
class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
  virtual void launch() = 0;
  // Whether the backend's graph replays memory its backend has since given back (the
  // cuda backend's cuDNN workspace, when a call grew it): the step must be captured again
  // before its next launch.
  virtual bool stale() const = 0;
};

// A captured step: the backend's graph and the host work each launch does around it.
template <class BackendGraph>
class CapturedStep final : public CapturedGraph {
 public:
  CapturedStep(std::unique_ptr<BackendGraph> g, std::vector<std::function<void()>> before,
               std::vector<std::function<void()>> effects)
      : graph_(std::move(g)), before_(std::move(before)), effects_(std::move(effects)) {}
  void launch() override {
    for (const auto& w : before_) w();
    graph_->launch();
    for (const auto& e : effects_) e();
  }
  bool stale() const override { return graph_->stale(); }

 private:
  std::unique_ptr<BackendGraph> graph_;
  std::vector<std::function<void()>> before_, effects_;
};

// Captures `step` (a callable running direct-mode plans that exist) into a graph of
// `impl`; returns it (a std::unique_ptr<CapturedStep<...>>). Nothing runs, and no
// before_each_launch or at_each_launch work is done, until it is launched.
template <CapturesGraphs Impl, class Step>
auto capture_step(Impl& impl, Step&& step) {
  struct Check final : detail::CaptureCheck {
    explicit Check(const Impl& i) : impl(i) {}
    void after(OpId op) const override {
      STRATA_CHECK(!impl.capture_broken(), "graph mode: ", op_name(op), " on ", Impl::kName,
                   " cannot be captured (it synchronised with the host or left the backend's stream); the step "
                   "runs in direct mode only");
    }
    const Impl& impl;
  };
  STRATA_CHECK(detail::t_capture == nullptr, "graph mode: a step capture started inside another");
  const Check check(impl);
  impl.begin_capture();
  detail::t_capture = &check;
  try {
    step();
  } catch (...) {
    detail::t_capture = nullptr;
    impl.abort_capture();
    throw;
  }
  detail::t_capture = nullptr;
  auto graph = impl.end_capture();
  using BackendGraph = typename decltype(graph)::element_type;
  return std::make_unique<CapturedStep<BackendGraph>>(std::move(graph), std::move(check.before),
                                                     std::move(check.effects));
}

}  // namespace strata::ops::direct
