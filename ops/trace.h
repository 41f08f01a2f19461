#pragma once
// Op trace: with STRATA_TRACE=1 in the environment (or set_trace_enabled(true)),
// every op dispatched through the virtual or static front end is recorded with its
// backend and host time. Off, it costs one predictable branch per call. With
// set_trace_sync(true) each traced call also waits for the backend's queue before and
// after it, so host_us becomes the op's own device time plus its host time, serialised
// (a per-op profile of an asynchronous backend; slows the step, never used in timing).
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "ops/table/op_id.h"

namespace strata::ops {

struct TraceEvent {
  OpId op;
  std::string_view backend;
  double host_us;
};

extern bool g_trace_enabled;
extern bool g_trace_sync;
inline bool trace_enabled() { return g_trace_enabled; }
void set_trace_enabled(bool on);
void set_trace_sync(bool on);
void record_trace(OpId op, std::string_view backend, double host_us);
std::vector<TraceEvent> take_trace();  // returns and clears the events so far
std::string format_trace(const std::vector<TraceEvent>& events);

template <class Call, class Sync>
void traced_call(OpId op, std::string_view backend, Call&& call, Sync&& sync) {
  if (g_trace_sync) sync();
  const auto t0 = std::chrono::steady_clock::now();
  call();
  if (g_trace_sync) sync();
  const auto t1 = std::chrono::steady_clock::now();
  record_trace(op, backend, std::chrono::duration<double, std::micro>(t1 - t0).count());
}

}  // namespace strata::ops
