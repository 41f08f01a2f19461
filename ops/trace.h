#pragma once
// Op trace: with STRATA_TRACE=1 in the environment (or set_trace_enabled(true)),
// every op dispatched through the virtual or static front end, and every backend
// kernel a direct-mode plan runs, is recorded with its backend, its start and its host
// time. Off, it costs one predictable branch per call. With set_trace_sync(true) each
// traced call also waits for the backend's queue before and after it, so host_us
// becomes the op's own device time plus its host time, serialised (a per-op profile
// of an asynchronous backend; slows the step, never used in timing).
//
// Programs add spans of their own (a training step, an evaluation) with TraceSpan, and
// write everything as Chrome's trace event format, which chrome://tracing and
// Perfetto (ui.perfetto.dev) open: complete events ("ph": "X") with microsecond
// timestamps, ops nested inside the spans that ran them.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/ops/table/op_id.h"

namespace strata::ops {

struct TraceEvent {
  OpId op;
  std::string_view backend;
  double host_us;
  double start_us = 0;  // since the process's first traced event (trace_clock_us)
  uint32_t thread = 0;  // a small per-thread number, 0 for the first thread that traced
};

// A program's own interval (a step, an evaluation), named by the program.
struct TraceSpanEvent {
  std::string name;
  double start_us = 0;
  double dur_us = 0;
  uint32_t thread = 0;
};

extern bool g_trace_enabled;
extern bool g_trace_sync;
inline bool trace_enabled() { return g_trace_enabled; }
void set_trace_enabled(bool on);
void set_trace_sync(bool on);
// Microseconds on the trace's clock (steady_clock, from a process-wide origin).
double trace_clock_us();
uint32_t trace_thread_id();
void record_trace(OpId op, std::string_view backend, double start_us, double host_us);
void record_span(std::string name, double start_us, double dur_us);
std::vector<TraceEvent> take_trace();  // returns and clears the op events so far
std::vector<TraceSpanEvent> take_spans();  // returns and clears the spans so far
std::string format_trace(const std::vector<TraceEvent>& events);  // CSV: op,backend,host_us
// Chrome trace event format (JSON object with "traceEvents"): ops as complete events
// named after the op, category "op" and args.backend; spans with category "span".
// `process` names the process row in the viewer.
std::string format_chrome_trace(const std::vector<TraceEvent>& events, const std::vector<TraceSpanEvent>& spans,
                                std::string_view process);

// Records [construction, destruction) as a span when the trace is on; nothing otherwise.
class TraceSpan {
 public:
  explicit TraceSpan(std::string name) {
    if (trace_enabled()) [[unlikely]] {
      name_ = std::move(name);
      start_us_ = trace_clock_us();
      on_ = true;
    }
  }
  ~TraceSpan() {
    if (on_) record_span(std::move(name_), start_us_, trace_clock_us() - start_us_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  std::string name_;
  double start_us_ = 0;
  bool on_ = false;
};

template <class Call, class Sync>
void traced_call(OpId op, std::string_view backend, Call&& call, Sync&& sync) {
  if (g_trace_sync) sync();
  const double t0 = trace_clock_us();
  call();
  if (g_trace_sync) sync();
  record_trace(op, backend, t0, trace_clock_us() - t0);
}

}  // namespace strata::ops
