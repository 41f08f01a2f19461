#pragma once
// Data-parallel training of one nn::Model per process (PyTorch's DistributedDataParallel
// for strata; Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
// Training", 2020):
//   - at construction, every parameter and device buffer takes rank 0's values, so all
//     ranks start from the same weights whatever their initialisation did;
//   - each train_step, the gradients are averaged over the ranks with NCCL
//     all-reduces, in buckets of about 25 MB taken in reverse registration order
//     (dist/buckets.h), on the process group's own stream; the optimizer then takes the
//     same step on every rank. In direct mode a network that reports its finished
//     layers during backward (nn::Module::set_grad_ready_hook: ResNet) has each bucket
//     start as soon as its gradients exist, overlapped with the rest of backward; the
//     tape modes start every bucket when backward ends.
// The averaging happens in the gradients' dtype, which is the parameters' (f32, or f64):
// mixed precision (bf16/f16 compute) keeps f32 master weights, so its gradients are
// averaged in f32. Works in every dispatch mode: all of them fill each parameter's
// .grad() before the optimizer runs (nn/model.h's gradient hook).
//
// Batch norm statistics stay per GPU, as PyTorch's default; BN's running statistics
// are those of each rank's own batches (rank 0's are the ones a checkpoint keeps).
//
// Not done yet (docs/distributed.md): overlap in the tape modes, and synchronised batch norm.
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "strata/dist/buckets.h"
#include "strata/dist/process_group.h"
#include "strata/nn/model.h"

namespace strata::dist {

struct DataParallelOptions {
  size_t bucket_bytes = kDefaultBucketBytes;
};

class DataParallel {
 public:
  // Broadcasts rank 0's parameters and buffers and installs the gradient hook on
  // `model` (which must outlive this object, as must `pg`). Collective.
  DataParallel(nn::Model& model, ProcessGroup& pg, const DataParallelOptions& o = {});
  ~DataParallel();  // removes the hook
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // What the hook runs: every parameter's gradient replaced by its mean over ranks.
  // A parameter without a gradient is an error (every parameter must take part).
  // Gradients of several backward passes must not be summed between steps (the
  // buckets of the first would start early): accumulate on one process only.
  void average_gradients();

  size_t num_buckets() const { return buckets_.size(); }
  // "2 ranks, 11,689,512 parameters in 2 buckets of <= 25 MiB (f32)".
  std::string describe() const;

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    size_t count = 0;            // elements
    Tensor staging;              // undefined for a bucket of one parameter (reduced in place)
  };
  void grads_ready(const nn::Module& m);
  void launch(const Bucket& b);

  nn::Model& model_;
  ProcessGroup& pg_;
  DataParallelOptions o_;
  nn::StateDict params_;
  std::vector<Bucket> buckets_;
  DType dtype_ = DType::f32;
  int64_t steps_ = 0;
  std::unordered_map<const void*, size_t> index_;  // parameter storage -> index into params_
  std::vector<bool> ready_;                        // this step's finished gradients
  size_t launched_ = 0;                            // buckets started this step
};

}  // namespace strata::dist
