#pragma once
// A read-only window on the cuda backend's calls, for a program that writes a planned step
// out as CUDA code of its own (codegen/cuda/): the op members that report call the observer
// with their argument struct before they run, then say what they ran for it (`LibraryCall`):
// the cuDNN engine and knobs, or the legacy algorithm, a convolution's plan chose (cuDNN picks
// them by heuristics or timing, so a program that wants the same bits must ask for exactly
// these), cuBLAS's GEMM as called, or that strata's own kernel ran. One observer per thread,
// none by default: a call pays a function call and a branch. Plain types only, so that code
// without the CUDA headers (the emitter, its tests) can read a record.
//
// Reporting ops: conv2d_fwd, linear_fwd, relu_fwd, max_pool2d_fwd, avg_pool2d_fwd,
// global_avg_pool_fwd, add, copy, space_to_depth_fwd; and a training step's conv2d_bwd_data,
// conv2d_bwd_weight, conv2d_bwd_bias, linear_bwd_data, linear_bwd_weight, relu_bwd, max_pool2d_bwd,
// softmax_xent_fwd, softmax_xent_bwd, dropout_fwd, dropout_bwd, fill, sgd_step (multi_sgd_step
// reports the single step of each parameter its lists take), batch_norm_fwd, batch_norm_bwd,
// global_avg_pool_bwd and space_to_depth_bwd; and a GPT's forward: index_select, layer_norm_fwd,
// attention_fwd, unary_fwd and bmm (a linear's epilogue the backend composes of its own ops is
// bracketed by on_composed, its parts reported as the ops they are). An observer must treat any other op run while it
// watches as unseen (the op trace, ops/trace.h, lists every kernel of a step).
#include <cstdint>
#include <utility>
#include <vector>

#include "strata/backends/api/composed_call.h"
#include "strata/ops/table/op_id.h"

namespace strata::backends::cuda {

struct LibraryCall {
  enum class Kind {
    conv_graph,     // a convolution from a cached cuDNN graph-API plan: engine, knobs, workspace, fused
    conv_legacy,    // cudnnConvolutionForward: algo, math, workspace
    conv_epilogue,  // strata's conv_epilogue kernel after the convolution (bias, residual, ReLU)
    activation,     // cudnnActivationForward (ReLU)
    own_kernel,     // strata's element-wise kernel (add, ReLU)
    pooling,        // cudnnPoolingForward: mode
    gap_kernel,     // strata's global average pooling kernel
    gemm,           // cublasGemmEx, in cuBLAS's column-major terms (below)
    gemv,           // strata's few-rows linear kernel (gemv.cu): mode = the elements a load moves
    memcpy,         // one cudaMemcpyAsync (src, dst, bytes), kind by the pointers' devices
    convert,        // strata's converting copy kernel (a broadcast, a strided copy)
    staged,         // an operand went through a temporary (the emitter refuses: it has no place for it)
    gemm_lt,        // cublasLtMatmul with the bias epilogue (half-precision linear; the emitter refuses it)
    split,          // the call ran as several along the batch (cuDNN's 32-bit limits; refused likewise)
    outside_copy,   // a copy outside any reporting op (a = source, c = destination): a Tensor's clone
    activation_bwd, // cudnnActivationBackward (ReLU's backward)
    pooling_bwd,    // cudnnPoolingBackward: mode
    // strata's per-channel sums (channel_reduce.cuh; conv bias gradient): mode 1 when the channel is
    // innermost; column sums (linear's bias gradient): mode 1 when read in 16-byte packs. Both: m =
    // the blocks along the summed dimension and k = the elements each takes, which strata sizes by
    // the GPU's SM count: the order of the sums, so a program repeats them rather than its own.
    channel_sums,
    column_sums,
    // Batch norm in training on cuDNN (mode: cudnnBatchNormMode_t): cudnnBatchNormalizationForwardTraining,
    // then for a fused forward strata's epilogue kernel (the residual, ReLU and mask over y in place);
    // for a fused backward strata's masking kernel (dy where the mask is set, into dz or dx), then
    // cudnnBatchNormalizationBackward. Each a value per thread: the grid orders no sum.
    batch_norm,
    batch_norm_epilogue,
    batch_norm_mask,
    batch_norm_bwd,
    own_batch_norm,  // strata's own batch norm kernels, or the evaluation-mode backward (the emitter refuses)
    // A GPT's forward. layer_norm: strata's kernel, mode = the threads a row takes (32: a warp, 256:
    // the block) or, for the register-resident form, -K (K chunks of 256 columns a lane); a row's
    // sums run in that form's order. attention: strata's whole-row kernel, m = its threads a query
    // (which order the row's sums), k = its dynamic shared memory; attention_other: another form
    // (mode: 1 split keys, 2 decoding, 3 cuBLAS with strata's softmax, 4 cuDNN; the emitter refuses
    // them). unary: strata's element-wise formula, mode 1 packed into 16-byte loads. gemm_batched:
    // cublasGemmStridedBatchedEx as gemm (alpha, the batch and its strides below).
    layer_norm,
    attention,
    attention_other,
    unary,
    gemm_batched,
  };
  Kind kind = Kind::own_kernel;
  // conv_graph: CUDNN_ATTR_ENGINE_GLOBAL_INDEX and the engine config's knob choices
  // (cudnnBackendKnobType_t, value); fused: the epilogue ran inside the graph.
  int64_t engine = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs{};
  bool fused = false;
  int64_t workspace = 0;  // conv_graph, conv_legacy: bytes
  int algo = -1, math = 0;  // conv_legacy: cudnnConvolutionFwdAlgo_t, cudnnMathType_t
  int64_t mode = 0;       // pooling: cudnnPoolingMode_t; gemm: cublasComputeType_t
  // gemm: C = op_a(A) op_b(B) * 1 + beta C, column-major, as passed to cublasGemmEx with
  // CUBLAS_GEMM_DEFAULT (cuBLAS picks the kernel from these and the handle's workspace and
  // math mode, which a program recreates). memcpy: a = source, c = destination, m = bytes.
  int op_a = 0, op_b = 0;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  float beta = 0.f;
  double alpha = 1.0;                                         // gemm_batched
  int64_t batch = 0, stride_a = 0, stride_b = 0, stride_c = 0;  // gemm_batched
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
};

class CallObserver {
 public:
  virtual ~CallObserver() = default;
  // Before op runs; `args` points at its argument struct (ops/table/op_args.h), valid during
  // the call only.
  virtual void on_call(ops::OpId op, const void* args) = 0;
  // What the latest reported call ran, in order (several for one call: a copy then a GEMM).
  virtual void on_library(const LibraryCall& call) = 0;
  // Around the parts of a call of `op` the backend composed of its own ops (begin true, then false).
  virtual void on_composed(ops::OpId /*op*/, bool /*begin*/) {}
};

// The observer of this thread's calls (null: none).
CallObserver* call_observer();
// Installs `o` on this thread for the guard's lifetime; the previous one is put back after.
class ScopedCallObserver {
 public:
  explicit ScopedCallObserver(CallObserver* o);
  ~ScopedCallObserver();
  ScopedCallObserver(const ScopedCallObserver&) = delete;
  ScopedCallObserver& operator=(const ScopedCallObserver&) = delete;

 private:
  CallObserver* saved_;
};

// The cuDNN the backend runs on (cudnnGetVersion(): 91900 for 9.19.0), which a program
// written against its engines names: global engine indices are a version's own.
int64_t cudnn_runtime_version();

template <class Args>
inline void observe_call(ops::OpId op, const Args& a) {
  if (CallObserver* o = call_observer()) [[unlikely]]
    o->on_call(op, &a);
}
inline void observe_library(const LibraryCall& c) {
  if (CallObserver* o = call_observer()) [[unlikely]]
    o->on_library(c);
}
// The same for a call of one kind alone, built only when an observer watches.
inline void observe_library(LibraryCall::Kind kind) {
  if (CallObserver* o = call_observer()) [[unlikely]] {
    LibraryCall c;
    c.kind = kind;
    o->on_library(c);
  }
}
inline bool observing() { return call_observer() != nullptr; }

// Brackets a composed call's parts for this thread's observer, if any (on_composed).
class ComposedCall : public ComposedScope<CallObserver> {
 public:
  explicit ComposedCall(ops::OpId op) : ComposedScope(op, call_observer()) {}
};

// strata's copies (copy_views) report what they ran inside an op that reports its copies (copy,
// linear_fwd's bias); elsewhere they report themselves as `outside_copy` only (a Tensor's clone of
// a step's result, or a staged operand's copy, which its op reports as `staged` too).
bool copies_observed();
class ScopedCopyObservation {
 public:
  ScopedCopyObservation();
  ~ScopedCopyObservation();
  ScopedCopyObservation(const ScopedCopyObservation&) = delete;
  ScopedCopyObservation& operator=(const ScopedCopyObservation&) = delete;

 private:
  bool saved_;
};

}  // namespace strata::backends::cuda
