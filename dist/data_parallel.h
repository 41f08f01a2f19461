#pragma once
// Data-parallel training of one nn::Model per process (PyTorch's DistributedDataParallel
// for strata; Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
// Training", 2020):
//   - at construction, every parameter and device buffer takes rank 0's values, so all
//     ranks start from the same weights whatever their initialisation did;
//   - each train_step, the gradients are averaged over the ranks with NCCL
//     all-reduces, in buckets of about 25 MB taken in reverse registration order, on
//     the process group's own stream; the optimizer then takes the same step on every
//     rank. The buckets (dist/grad_buckets.h) hold the gradients themselves (PyTorch's
//     gradient_as_bucket_view), and each starts as soon as its gradients are complete,
//     overlapped with the rest of backward, in every dispatch mode; graph mode captures
//     them with the rest of the step (NCCL calls inside the CUDA graph), and after each
//     launch the process group's watchdog bounds the launched work as it bounds the
//     all-reduces of the other modes.
// The averaging happens in the gradients' dtype, which is the parameters' (f32, or f64):
// mixed precision (bf16/f16 compute) keeps f32 master weights, so its gradients are
// averaged in f32.
//
// Batch norm statistics stay per GPU, as PyTorch's default; BN's running statistics
// are those of each rank's own batches (rank 0's are the ones a checkpoint keeps). With
// DataParallelOptions::sync_batch_norm they are those of the union of the ranks' batches
// (PyTorch's SyncBatchNorm): each batch norm's forward and backward sum their per-channel
// statistics over the ranks (two all-reduces of 2C+1 doubles per batch norm and step), and
// the running statistics agree on every rank.
//
// Construct it before the model's first step: direct mode's plans made before it keep
// gradient buffers of their own, whose gradients are then copied into the buckets.
#include <memory>
#include <string>

#include "strata/dist/grad_buckets.h"
#include "strata/dist/process_group.h"
#include "strata/nn/model.h"

namespace strata::dist {

class DataParallel {
 public:
  // Broadcasts rank 0's parameters and buffers and lays out the gradient buckets over
  // `model`, installing its hooks (`model` and `pg` must outlive this object). Collective.
  // With o.sync_batch_norm, also points the model's batch norms at `pg` (until destroyed).
  DataParallel(nn::Model& model, ProcessGroup& pg, const DataParallelOptions& o = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // What the gradient hook runs (GradientBuckets::average_gradients).
  void average_gradients() { buckets_->average_gradients(); }

  const GradientBuckets& buckets() const { return *buckets_; }
  size_t num_buckets() const { return buckets_->num_buckets(); }
  // The batch norms synchronised over the ranks (0 without sync_batch_norm).
  int synced_batch_norms() const { return synced_; }
  // "2 ranks, 11,689,512 parameters in 2 gradient buckets of <= 25 MiB (f32), gradients
  // as bucket views, NCCL all-reduce (average)[, 20 batch norms synchronised]".
  std::string describe() const;

 private:
  nn::Model& model_;
  ProcessGroup& pg_;
  std::unique_ptr<GradientBuckets> buckets_;
  int synced_ = 0;
};

}  // namespace strata::dist
