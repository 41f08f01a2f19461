#pragma once
// strata's own CUDA code that the cuda emitter writes into generated programs, as it is: the
// blocks of backends/cuda's sources between their "codegen:begin cuda_kernels" and
// "codegen:end" lines (element types, strided indexing, the element-wise, converting,
// convolution-epilogue and global-average-pooling kernels), and for a training step the
// "cuda_train_kernels" blocks (the loss, fill, dropout, per-channel and column sums, SGD's
// update, batch norm's epilogue and masking, the backward of global average pooling and of
// space-to-depth) with the op table's pieces they use ("cuda_train_ops", "dropout_rng"),
// gathered at build time (codegen/embed_snippets.cmake). The kernels' blocks come one by one
// with the tag of their begin line, so that a program carries only the kernels it runs.
namespace strata::codegen::cuda {

struct SnippetBlock {
  const char* tag;  // "" for a block every program carries (indexing, element types, launches)
  const char* text;
};

extern const SnippetBlock k_cuda_kernels_blocks[];
extern const int k_cuda_kernels_block_count;
extern const SnippetBlock k_cuda_train_kernels_blocks[];
extern const int k_cuda_train_kernels_block_count;
extern const char* const k_cuda_train_ops;
extern const char* const k_dropout_rng;
// The element-wise formulas' math and unary rows (ops/table/pointwise.h, pointwise.def), which a
// GPT's GELU computes each element with.
extern const char* const k_pointwise_math;
extern const char* const k_pointwise_rows;

}  // namespace strata::codegen::cuda
