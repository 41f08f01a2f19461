#pragma once
// strata's own code that the onednn emitter writes into generated programs, as it is: the
// blocks of backends/cpu/threads.h and backends/onednn/context.h between their
// "codegen:begin <name>" and "codegen:end" lines, gathered at build time
// (codegen/embed_snippets.cmake).
namespace strata::codegen::onednn {

extern const char* const k_thread_rule;  // loops::Work and loops::threads_for
extern const char* const k_staging;      // Staged and ScopedOmpThreads

}  // namespace strata::codegen::onednn
