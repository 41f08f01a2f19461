#pragma once
// STRATA_TRACE=1 for strata_train and strata_infer: the op trace (ops/trace.h: every
// backend kernel call, in every dispatch mode) and the program's own spans (training
// steps, evaluations, inferences) are written when the program ends, as Chrome's
// trace event format, to $STRATA_TRACE_FILE or else <program>-trace.json in the
// current directory. It opens in ui.perfetto.dev or chrome://tracing.
#include <cstdio>
#include <string>

namespace strata::train {

// Where the trace goes for `program` ("" when the trace is off).
std::string trace_file_path(const std::string& program);

// Writes the trace recorded so far (and clears it) when the trace is on, and says
// where on `note` (stderr); a file that cannot be written is reported there too,
// without changing the program's exit status. Returns the path written, or "".
std::string write_trace_file(const std::string& program, std::FILE* note);

}  // namespace strata::train
