#pragma once
// The machinery of the optimizers' cuda kernels, shared by optim.cu (SGD, Adam) and
// adaptive_optim.cu (RMSprop, Adagrad, Adadelta): the multi-tensor launch of a list of
// parameters, graph mode's run-time {lr, step} pairs and loss scaling's state.
// Internal to backends/cuda.
#include <algorithm>
#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "strata/backends/cuda/kernels.cuh"
#include "strata/ops/table/relu_mask.h"

namespace strata::backends::cuda {
namespace {

// ---- multi-tensor steps (PyTorch's fused optimizers, apex's multi_tensor_apply) ----
// A list of dense parameters in one launch: each block steps one chunk of one tensor. The
// tensors' table travels in the kernel's parameters (at most Tensor::kMax tensors a launch,
// under the 4 KiB every CUDA version takes), so a captured step refers to no host memory.
// codegen:begin cuda_train_kernels sgd_list
constexpr int64_t kListChunk = 4 * kThreads;  // elements per block

// A list's entry type Tensor (SgdTensor, ...): one tensor's operands and host-side
// hyperparameters, with Options (the op's options), kMax (entries a launch takes), n and
// first_block; run_time() gives what a block reads from the device once (graph mode's
// {lr, step}, loss scaling's skipped steps), update() one element's step with it, the
// same update the single step's kernel runs.
template <class Tensor>
struct TensorList {
  static constexpr int kMax = Tensor::kMax;
  Tensor t[kMax];
  int count;
  typename Tensor::Options opt;
  const double* amp;
};

// The tensor whose chunks include this block: the last one starting at or before it.
template <class List>
__device__ const auto& list_tensor(const List& l) {
  int lo = 0, hi = l.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (l.t[mid].first_block <= static_cast<int64_t>(blockIdx.x))
      lo = mid;
    else
      hi = mid - 1;
  }
  return l.t[lo];
}

template <class Tensor>
__global__ void __launch_bounds__(kThreads) multi_tensor_kernel(const __grid_constant__ TensorList<Tensor> l) {
  const double gs = l.amp ? l.amp[ops::kAmpInvScale] : 1.0;
  if (gs == 0.0) return;
  const Tensor& t = list_tensor(l);
  const int64_t begin = (static_cast<int64_t>(blockIdx.x) - t.first_block) * kListChunk;
  const int64_t end = begin + kListChunk < t.n ? begin + kListChunk : t.n;
  const auto run_time = t.run_time(l.opt, l.amp);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) t.update(i, l.opt, run_time, gs);
}
// codegen:end

// Whether a list's kernel can step this parameter: its operands dense and alike in memory
// order (the optimizer's state is allocated like the parameter); others take the single
// step's strided kernel.
inline bool listable(const ops::TensorView& param, std::initializer_list<const ops::TensorView*> others) {
  if (!ops::dense_for_mask(param)) return false;
  for (const ops::TensorView* o : others)
    if (!ops::same_memory_order(param, *o)) return false;
  return true;
}

// codegen:begin cuda_train_kernels sgd_list
// A group's steps as multi-tensor launches of up to Tensor::kMax tensors each, on `stream`: entry(i)
// gives parameter i's list entry, or none where it took the single step (or is empty); check()
// follows each launch.
template <class Tensor, class Entry, class Check>
void launch_lists(cudaStream_t stream, size_t count, const typename Tensor::Options& opt, const double* amp,
                  Entry entry, Check check) {
  TensorList<Tensor> l{};
  l.opt = opt;
  l.amp = amp;
  int64_t blocks = 0;
  const auto launch = [&] {
    if (l.count == 0) return;
    multi_tensor_kernel<Tensor><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(l);
    check();
    l.count = 0;
    blocks = 0;
  };
  for (size_t i = 0; i < count; ++i) {
    std::optional<Tensor> t = entry(i);
    if (!t) continue;
    t->first_block = blocks;
    blocks += (t->n + kListChunk - 1) / kListChunk;
    l.t[l.count++] = *t;
    if (l.count == Tensor::kMax) launch();
  }
  launch();
}
// codegen:end

template <class Tensor, class Entry>
void step_lists(Context& ctx, size_t count, const typename Tensor::Options& opt, const double* amp, Entry entry) {
  launch_lists<Tensor>(ctx.stream, count, opt, amp, entry, [] { STRATA_CUDA_CHECK(cudaGetLastError()); });
}

// The loss-scaling state of a step's arguments, or null.
inline const double* amp_of(const ops::TensorView& s, const char* op) {
  if (!s.defined) return nullptr;
  STRATA_CHECK(s.device.is_cuda() && s.dtype == DType::f64 && s.numel() == 4 && s.is_contiguous(), op,
               ": amp must be a dense f64 [4] loss-scaling state on the device, got ", s.sizes.str(), " ",
               dtype_name(s.dtype), " on ", s.device.str());
  return s.ptr<const double>();
}

// The {lr, step} pairs a step reads when its kernel runs, as device pointers: given on the
// device, as they are; in pinned host memory (graph mode's optimizer keeps them there),
// copied into this call's scratch on the stream, one copy for all of them. Inside a capture
// that copy is a node of the graph, which cuda::Graph refills from the host memory at each
// launch, so no device memory outlives the call; outside one the copy is waited for, as
// copy_into's from pinned memory is (the host may change the values once the call returns).
class RunTimeHypers {
 public:
  RunTimeHypers(Context& ctx, std::span<const ops::TensorView> hypers, const char* op) : ptrs_(hypers.size(), nullptr) {
    const char *lo = nullptr, *hi = nullptr;
    for (size_t i = 0; i < hypers.size(); ++i) {
      const ops::TensorView& h = hypers[i];
      if (!h.defined) continue;
      STRATA_CHECK(h.dtype == DType::f64 && h.numel() == 2 && h.is_contiguous() &&
                       (h.device.is_cuda() || h.device.is_cpu()),
                   op, ": hyper must be a dense f64 {lr, step}, got ", h.sizes.str(), " ", dtype_name(h.dtype), " on ",
                   h.device.str());
      const auto* p = static_cast<const char*>(h.data);
      if (h.device.is_cuda()) {
        ptrs_[i] = reinterpret_cast<const double*>(p);
        continue;
      }
      STRATA_CHECK(host_memory_is_pinned(p), op, ": a hyper in host memory must be pinned (pinned_host_allocator()): "
                                             "the step's copy of it is read by the device after the call returns");
      lo = lo ? std::min(lo, p) : p;
      hi = hi ? std::max(hi, p + 16) : p + 16;
    }
    if (!lo) return;
    const auto bytes = static_cast<size_t>(hi - lo);
    // The pairs are rows of one host tensor (the optimizer's); a span much larger than them
    // would be pairs from unrelated allocations, which one copy must not read across.
    STRATA_CHECK(bytes <= 16 * hypers.size(), op, ": the hypers in host memory must be rows of one tensor (they span ",
                 bytes, " bytes for ", hypers.size(), " pairs)");
    copy_ = DeviceBuffer(ctx, bytes);
    STRATA_CUDA_CHECK(cudaMemcpyAsync(copy_.get(), lo, bytes, cudaMemcpyHostToDevice, ctx.stream));
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    STRATA_CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &status));
    if (status == cudaStreamCaptureStatusNone) STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    for (size_t i = 0; i < hypers.size(); ++i)
      if (hypers[i].defined && hypers[i].device.is_cpu())
        ptrs_[i] = reinterpret_cast<const double*>(copy_.as<char>() + (static_cast<const char*>(hypers[i].data) - lo));
  }
  const double* operator[](size_t i) const { return ptrs_[i]; }

 private:
  DeviceBuffer copy_;
  std::vector<const double*> ptrs_;
};

}  // namespace
}  // namespace strata::backends::cuda
