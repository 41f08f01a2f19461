#include "examples/train/trace_file.h"

#include <cstdlib>
#include <fstream>

#include "strata/ops/trace.h"

namespace strata::train {

std::string trace_file_path(const std::string& program) {
  if (!ops::trace_enabled()) return "";
  const char* f = std::getenv("STRATA_TRACE_FILE");
  return f != nullptr && *f != '\0' ? f : program + "-trace.json";
}

std::string write_trace_file(const std::string& program, std::FILE* note) {
  const std::string path = trace_file_path(program);
  if (path.empty()) return "";
  const auto events = ops::take_trace();
  const auto spans = ops::take_spans();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << ops::format_chrome_trace(events, spans, program) << '\n';
  f.close();
  if (!f) {
    if (note) std::fprintf(note, "%s: warning: could not write the trace to '%s'\n", program.c_str(), path.c_str());
    return "";
  }
  if (note)
    std::fprintf(note, "%s: trace: %zu op calls and %zu spans written to %s (Chrome trace format: open it in "
                       "ui.perfetto.dev or chrome://tracing)\n",
                 program.c_str(), events.size(), spans.size(), path.c_str());
  return path;
}

}  // namespace strata::train
