#pragma once
// Direct mode's memory plan: the activation-sized buffers of a whole step (forward,
// loss, backward) share one arena wherever their lifetimes do not overlap, so a
// planned step holds what the tape modes hold — each activation as long as backward
// needs it, each gradient until it is consumed — instead of every buffer it ever wrote.
//
// A step is planned the first time its key is seen, in two passes over the same code:
//   1. recording: the plans are made against placeholder buffers (address space
//      reserved without memory, which faults if touched) and every kernel call is
//      noted, not run: the views of its argument struct (ops/table/arg_views.h) say
//      which buffers it touches, so each buffer's lifetime is the span from its first
//      to its last use, in the step's kernel order;
//   2. the arena is laid out (arena_plan.h, greedy by size) and allocated once; the
//      step then runs for real and its plans are made again, each buffer at its offset.
// Later steps with the key reuse the plans (their inputs, and so the layers' plan
// cache keys, are the arena's stable addresses).
//
// Plans allocate the buffers a step writes and later reads (outputs, input gradients,
// saved tensors) through planned_empty*. Parameter gradients, which .grad() takes over,
// are planned to live to the step's end: they share memory with activations that died
// before them, and whoever runs the next step copies those still held out of the arena
// first (holds()). What a plan writes once and reads every step stays an ordinary
// allocation; the loss's seed is instead written each step (ops/direct/plans.h), so that
// it takes arena bytes only around the loss's backward. Outside a planned step
// planned_empty* is Tensor::empty.
//
// The recording pass leaves host state alone: code that changes it during a step (a
// gradient handed to .grad(), Dropout's random offset, a batch counter) asks
// recording() first.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::ops::direct {

namespace detail {
struct Recording;
struct Assignment;
// The pass this thread is in, if any (constinit: read without a TLS wrapper call).
extern constinit thread_local Recording* t_recording;
extern constinit thread_local Assignment* t_assignment;
// Recording: the buffer containing `data` (if one was planned) is in use at the current position.
void note_use(const void* data);
// Recording: the kernel call at the current position is complete.
void next_position();
// How many threads are in a recording or assignment pass now. While none is, planned_empty* is
// Tensor::empty without reading the thread's pass (in a shared library a thread-local read is a
// call): the eager front end allocates through the same bindings as the plans at its old cost.
extern std::atomic<int> g_passes;
Tensor planned_empty_in_pass(const Shape& sizes, DType dt, Device d, MemoryFormat fmt, int life);
}  // namespace detail

// Whether this thread is in a recording pass (kernels noted, not run).
inline bool recording() { return detail::t_recording != nullptr; }

// How long a planned buffer lives: from its first to its last use by a kernel of the
// step, or from its first use to the step's end (a gradient read after the step).
enum class Lifetime : uint8_t { step_local, to_step_end };

// Like Tensor::empty and Tensor::empty_like, for a buffer written anew each step.
inline Tensor planned_empty(const Shape& sizes, DType dt, Device d, MemoryFormat fmt = MemoryFormat::contiguous,
                            Lifetime life = Lifetime::step_local) {
  if (detail::g_passes.load(std::memory_order_relaxed) == 0) [[likely]]
    return Tensor::empty(sizes, dt, d, fmt);
  return detail::planned_empty_in_pass(sizes, dt, d, fmt, static_cast<int>(life));
}
inline Tensor planned_empty_like(const Tensor& x, const Shape& sizes, DType dt) {
  return planned_empty(sizes, dt, x.device(), Tensor::format_like(x, sizes));
}
inline Tensor planned_empty_like(const Tensor& x, const Shape& sizes) {
  return planned_empty_like(x, sizes, x.dtype());
}
// The buffer a plan writes parameter `param`'s gradient into, which .grad() then takes
// over: param's gradient home (Tensor::grad_home, a data-parallel bucket's view) when it
// has these sizes and dtype, so the kernel writes straight into the bucket; otherwise
// planned_empty(..., Lifetime::to_step_end). Contiguous.
Tensor planned_grad(const Tensor& param, const Shape& sizes, DType dt);

// Whether t's memory is a buffer planned by the step being recorded or assigned (planned_empty*):
// the step's own, which its plans may write anywhere in (a user's tensor handed to a step is not).
bool planned_in_step(const Tensor& t);

// The alignment of the buffers planned in one memory on a device of type t (arenas,
// gradient buckets): a cache line and vector on the CPU (core/allocator.h); on a GPU 16
// bytes, the widest vector strata's kernels load and the most alignment the cuDNN graphs
// are told (backends/cuda/conv_graph.cpp), so a kernel sees the same alignment class
// wherever its buffer was placed; more only pads.
int64_t buffer_alignment(DeviceType t);

// Recording: `undo` runs when the recording ends (or fails), before its placeholders are
// released — a layer drops the plans it made against them.
void on_recording_end(std::function<void()> undo);

// What the latest planned step's memory came to.
struct StepMemoryStats {
  int64_t buffers = 0;       // planned buffers
  int64_t arena_bytes = 0;   // the arena they share
  int64_t sum_bytes = 0;     // what they would take each in its own allocation
  int64_t lower_bound = 0;   // the most bytes alive at one kernel call
};

// The planned steps of one model (or any owner of direct-mode plans).
class StepMemory {
 public:
  StepMemory();
  ~StepMemory();
  StepMemory(const StepMemory&) = delete;
  StepMemory& operator=(const StepMemory&) = delete;

  // Runs `step` (a callable making and running direct-mode plans) under the plan for
  // `key`, a string that tells steps with different plans apart (shapes, dtypes,
  // train/eval). The first time, step runs twice (recording, then for real); `outputs`
  // (a callable returning the tensors the caller reads after the step) live to its end.
  template <class Step, class Outputs>
  void run(const std::string& key, Device device, Step&& step, Outputs&& outputs) {
    if (known(key)) {
      step();
      return;
    }
    {
      RecordingPass pass(*this);
      step();
      for (const Tensor& t : outputs()) pass.keep(t);
      pass.lay_out(device);
    }
    {
      AssignmentPass pass(*this, device);
      step();
      pass.finish();
    }
    remember(key);
  }

  // Whether the step with `key` was planned (and its plans are made).
  bool known(const std::string& key) const;
  const StepMemoryStats& last() const { return last_; }
  // Whether t lives in one of this owner's arenas (and so is overwritten by its next step).
  bool holds(const Tensor& t) const;

 private:
  class RecordingPass {
   public:
    explicit RecordingPass(StepMemory& m);
    ~RecordingPass();
    void keep(const Tensor& t);
    void lay_out(Device d);

   private:
    StepMemory& m_;
    std::unique_ptr<detail::Recording> rec_;
  };
  class AssignmentPass {
   public:
    AssignmentPass(StepMemory& m, Device d);
    ~AssignmentPass();
    void finish();

   private:
    StepMemory& m_;
    std::unique_ptr<detail::Assignment> as_;
  };

  void remember(const std::string& key);

  std::vector<std::string> keys_;  // most recent first, bounded
  std::vector<std::pair<const Storage*, std::weak_ptr<Storage>>> arenas_;  // alive while a plan uses them
  std::vector<int64_t> offsets_, bytes_;  // the latest recording's layout, for its assignment pass
  int64_t arena_bytes_ = 0;
  StepMemoryStats last_;
};

}  // namespace strata::ops::direct
