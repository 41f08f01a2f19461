#pragma once
// The gradient buckets of data-parallel training, apart from the transport: which
// parameters share a bucket, where each gradient lies in the bucket's flat buffer, when
// a bucket is complete and what it takes to average it. dist::DataParallel drives them
// over NCCL (dist::ProcessGroup is a GradientReducer); tests drive them on the CPU with
// a reducer of their own. No CUDA or NCCL here.
//
// Gradients as views of the buckets (PyTorch DDP's gradient_as_bucket_view; on by
// default): each parameter's gradient home (Tensor::grad_home) is its place in its
// bucket, and after a step its .grad() is that view, averaged in place: no copy back.
// How a gradient gets there depends on the dispatch mode:
//   - direct mode (and graph mode's uncaptured steps): the plans write each gradient
//     straight into its view (ops/direct/step_memory.h, planned_grad), no copy at all,
//     provided the plans are made after this object (construct it before the first
//     step; plans made earlier keep their own buffers and take the copy below);
//   - the tape modes (virtual, static): every backward formula returns a tensor the
//     front end allocated, so a gradient is copied into its view once when its bucket
//     starts (the staging path's copy in; the copy out is gone);
//   - anywhere, a gradient that is not its view (a plan made before the buckets, loss
//     scaling's unscaled copies, a gradient summed over two backward passes) is copied in
//     the same way.
// With the views off, each bucket's gradients are copied into its buffer and back out
// after the all-reduce (a bucket of one parameter is averaged in place), as before.
// Either way the same values are averaged in the same buffer layout: the results agree
// bit for bit.
//
// Exchange in half precision (DataParallelOptions::exchange_dtype bf16 or f16; PyTorch DDP's
// bf16_compress_hook and fp16_compress_hook): each bucket's gradients are rounded into a bucket of
// that dtype when the bucket starts, the all-reduce averages that one (half the bytes over the
// links), and the mean is widened back into the gradients after the exchange. Both conversions
// run on the model's stream, so every rank rounds the same way; the mean is the rounded
// gradients' mean, rounded once more by the all-reduce.
//
// Overlap: a bucket starts as soon as all its parameters are reported complete
// (nn::Model::set_param_ready_hook: every parameter in the tape modes, as the autograd
// engine finishes it; in direct mode those of the modules the network reports), in
// bucket order, so every rank issues the same all-reduces in the same order; the
// buckets left start when backward ends (the model's gradient hook).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "strata/dist/buckets.h"
#include "strata/nn/model.h"

namespace strata::dist {

struct DataParallelOptions {
  size_t bucket_bytes = kDefaultBucketBytes;
  // Gradients live in their buckets (see above); off: staged by copies in and out.
  bool gradient_as_bucket_view = true;
  // dist::DataParallel: every batch norm of the model normalises over the rows of all ranks
  // in training (PyTorch's SyncBatchNorm; nn::BatchNormOptions::sync). Off: each rank's own.
  bool sync_batch_norm = false;
  // The dtype the gradients cross the links in: the parameters' (none given), or bf16 or f16 to
  // halve the bytes (see above).
  std::optional<DType> exchange_dtype;
};

// exchange_dtype from a program's option: "" (none: the parameters' dtype), "bf16" or "f16";
// anything else is an error naming `option`.
std::optional<DType> exchange_dtype_from_name(const std::string& name, const char* option = "--grad-exchange");

// What averaging the buckets asks of a group of ranks. Work is enqueued in call order.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual int world() const = 0;
  // What follows waits for the model's work so far (the backend's stream).
  virtual void begin() = 0;
  // Copies `bytes` between buffers on the model's device.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // `count` elements at `data` (f32, f64, bf16 or f16) replaced by their mean over the ranks.
  virtual void all_reduce_mean(void* data, size_t count, DType dt) = 0;
  // The model's later work waits for all of the above; `what` names it in errors.
  virtual void end(const char* what) = 0;
};

class GradientBuckets {
 public:
  // Lays out the buckets over `model`'s parameters (one floating dtype, f32 or f64, on
  // any device) and, for a world of more than one rank, installs the model's gradient
  // and parameter-ready hooks and, with the views on, the parameters' gradient homes.
  // `model` and `reducer` must outlive this object.
  GradientBuckets(nn::Model& model, GradientReducer& reducer, const DataParallelOptions& o = {});
  ~GradientBuckets();  // removes the hooks and the gradient homes
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // What the gradient hook runs: the buckets not started yet start, then every
  // parameter's gradient is its mean over ranks (once the model's next work runs). A
  // parameter without a gradient is an error (every parameter must take part), as is
  // one completed twice in a step (several backward passes summed before a step:
  // accumulate on one process only).
  void average_gradients();

  size_t num_buckets() const { return buckets_.size(); }
  const std::vector<BucketLayout>& layout() const { return layout_; }
  // Bucket b's flat buffer, and parameter i's view in it (registration order; the
  // gradient home when the views are on).
  const Tensor& buffer(size_t b) const { return buckets_[b].buffer; }
  // What bucket b's all-reduce averages: its buffer, or its half-precision copy.
  const Tensor& exchanged(size_t b) const { return low_ ? buckets_[b].low : buckets_[b].buffer; }
  const Tensor& view(size_t param) const { return views_[param]; }
  // Of the latest step: the gradients copied into or out of a bucket, and the buckets
  // started before backward ended.
  int64_t copies() const { return last_copies_; }
  size_t started_early() const { return last_early_; }
  // "2 buckets of <= 25 MiB (f32), gradients as bucket views".
  std::string describe() const;

 private:
  struct Bucket {
    Tensor buffer;              // the flat buffer of layout_[b].bytes
    Tensor low;                 // its copy in the exchange dtype, when that is narrower
    size_t remaining = 0;       // this step's parameters not complete yet
  };
  void param_ready(const Tensor& p);
  void launch(size_t b);
  void launch_low(size_t b, const std::vector<Tensor>& grads);
  void finish_low();
  void finish_step();

  nn::Model& model_;
  GradientReducer& reducer_;
  DataParallelOptions o_;
  nn::StateDict params_;
  DType dtype_ = DType::f32;
  bool low_ = false;                            // exchanged in a narrower dtype than dtype_
  DType exchange_ = DType::f32;
  std::vector<BucketLayout> layout_;
  std::vector<Bucket> buckets_;
  std::vector<Tensor> views_;                   // per parameter
  std::vector<size_t> bucket_of_;               // per parameter
  std::unordered_map<const void*, size_t> index_;  // parameter data -> index into params_
  std::vector<bool> ready_;                     // this step's completed parameters
  size_t launched_ = 0;                         // buckets started this step
  std::vector<Tensor> retired_;                 // gradients copied into views, alive until end()
  int64_t steps_ = 0, copies_ = 0, last_copies_ = 0;
  size_t early_ = 0, last_early_ = 0;
  bool active_ = false;                         // world > 1: hooks installed
};

}  // namespace strata::dist
