#pragma once
// strata's own code that the onednn emitter writes into generated programs, as it is: the
// blocks of strata's headers between their
// "codegen:begin <name>" and "codegen:end" lines, gathered at build time
// (codegen/embed_snippets.cmake).
namespace strata::codegen::onednn {

extern const char* const k_thread_rule;  // loops::Work and loops::threads_for
extern const char* const k_staging;      // Staged and ScopedOmpThreads
// The training step's plain loops (backends/cpu: elementwise.h, reduce.h, loss.h, optim.h)
// and dropout's counter-based mask (ops/table/op_args.h).
extern const char* const k_train_loops;
extern const char* const k_dropout_rng;
// A GPT's forward: the rows of layer norm and the (batch, head) pairs of attention
// (backends/cpu/transformer_ops.h), and the element-wise formulas' unary rows
// (ops/table/pointwise.def) with the math they call (ops/table/pointwise.h).
extern const char* const k_transformer_loops;
extern const char* const k_pointwise_math;
extern const char* const k_pointwise_rows;

}  // namespace strata::codegen::onednn
