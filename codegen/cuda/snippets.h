#pragma once
// strata's own CUDA code that the cuda emitter writes into generated programs, as it is: the
// blocks of backends/cuda's sources between their "codegen:begin cuda_kernels" and
// "codegen:end" lines (element types, strided indexing, the element-wise, converting,
// convolution-epilogue and global-average-pooling kernels), and for a training step the
// "cuda_train_kernels" blocks (the loss, fill, dropout, per-channel and column sums, SGD's
// update) with the op table's pieces they use ("cuda_train_ops", "dropout_rng"), gathered at
// build time (codegen/embed_snippets.cmake).
namespace strata::codegen::cuda {

extern const char* const k_cuda_kernels;
extern const char* const k_cuda_train_ops;
extern const char* const k_dropout_rng;
extern const char* const k_cuda_train_kernels;

}  // namespace strata::codegen::cuda
