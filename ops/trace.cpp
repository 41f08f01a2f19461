#include "ops/trace.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

namespace strata::ops {

namespace {
bool env_trace() {
  const char* v = std::getenv("STRATA_TRACE");
  return v != nullptr && std::strcmp(v, "0") != 0 && *v != '\0';
}
std::mutex g_mu;
std::vector<TraceEvent> g_events;
}  // namespace

bool g_trace_enabled = env_trace();

bool g_trace_sync = false;

void set_trace_enabled(bool on) { g_trace_enabled = on; }
void set_trace_sync(bool on) { g_trace_sync = on; }

void record_trace(OpId op, std::string_view backend, double host_us) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.push_back({op, backend, host_us});
}

std::vector<TraceEvent> take_trace() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<TraceEvent> out;
  out.swap(g_events);
  return out;
}

std::string format_trace(const std::vector<TraceEvent>& events) {
  std::ostringstream os;
  os << "op,backend,host_us\n";
  for (const auto& e : events) os << op_name(e.op) << ',' << e.backend << ',' << e.host_us << '\n';
  return os.str();
}

}  // namespace strata::ops
