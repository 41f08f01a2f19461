#include "strata/ops/trace.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

namespace strata::ops {

namespace {
bool env_trace() {
  const char* v = std::getenv("STRATA_TRACE");
  return v != nullptr && std::strcmp(v, "0") != 0 && *v != '\0';
}
std::mutex g_mu;
std::vector<TraceEvent> g_events;
std::vector<TraceSpanEvent> g_spans;
std::chrono::steady_clock::time_point origin() {
  static const auto t = std::chrono::steady_clock::now();
  return t;
}
std::atomic<uint32_t> g_next_thread{0};
}  // namespace

bool g_trace_enabled = env_trace();

bool g_trace_sync = false;

void set_trace_enabled(bool on) { g_trace_enabled = on; }
void set_trace_sync(bool on) { g_trace_sync = on; }

double trace_clock_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin()).count();
}

uint32_t trace_thread_id() {
  thread_local const uint32_t id = g_next_thread++;
  return id;
}

void record_trace(OpId op, std::string_view backend, double start_us, double host_us) {
  const uint32_t tid = trace_thread_id();
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.push_back({op, backend, host_us, start_us, tid});
}

void record_span(std::string name, double start_us, double dur_us) {
  const uint32_t tid = trace_thread_id();
  std::lock_guard<std::mutex> lock(g_mu);
  g_spans.push_back({std::move(name), start_us, dur_us, tid});
}

std::vector<TraceEvent> take_trace() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<TraceEvent> out;
  out.swap(g_events);
  return out;
}

std::vector<TraceSpanEvent> take_spans() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<TraceSpanEvent> out;
  out.swap(g_spans);
  return out;
}

std::string format_trace(const std::vector<TraceEvent>& events) {
  std::ostringstream os;
  os << "op,backend,host_us\n";
  for (const auto& e : events) os << op_name(e.op) << ',' << e.backend << ',' << e.host_us << '\n';
  return os.str();
}

std::string format_chrome_trace(const std::vector<TraceEvent>& events, const std::vector<TraceSpanEvent>& spans,
                                std::string_view process) {
  using nlohmann::json;
  json out = json::array();
  out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", process}}}});
  for (const auto& s : spans)
    out.push_back({{"name", s.name}, {"cat", "span"}, {"ph", "X"}, {"ts", s.start_us}, {"dur", s.dur_us},
                   {"pid", 1}, {"tid", s.thread}});
  for (const auto& e : events)
    out.push_back({{"name", op_name(e.op)}, {"cat", "op"}, {"ph", "X"}, {"ts", e.start_us}, {"dur", e.host_us},
                   {"pid", 1}, {"tid", e.thread}, {"args", {{"backend", e.backend}}}});
  return json{{"traceEvents", std::move(out)}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace strata::ops
