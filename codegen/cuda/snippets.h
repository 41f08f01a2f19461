#pragma once
// strata's own CUDA code that the cuda emitter writes into generated programs, as it is: the
// blocks of backends/cuda's sources between their "codegen:begin cuda_kernels" and
// "codegen:end" lines (element types, strided indexing, the element-wise, converting,
// convolution-epilogue and global-average-pooling kernels), gathered at build time
// (codegen/embed_snippets.cmake).
namespace strata::codegen::cuda {

extern const char* const k_cuda_kernels;

}  // namespace strata::codegen::cuda
