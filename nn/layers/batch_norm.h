#pragma once
// BatchNorm2d over the channels of [N,C,H,W], as torch.nn.BatchNorm2d (affine,
// track_running_stats): parameters weight (gamma), bias (beta); buffers
// running_mean, running_var, num_batches_tracked. Training normalises with batch
// statistics and updates the running ones (momentum 0.1, unbiased variance);
// eval uses the running statistics.
// num_batches_tracked is an i64 scalar kept on the host whatever the device: no
// kernel reads it (momentum is set), it exists so state dicts match PyTorch's.
#include "strata/nn/layers/direct_layer.h"
#include "strata/ops/direct/steps/batch_norm_step.h"

namespace strata::nn {

struct BatchNormOptions {
  double eps = 1e-5, momentum = 0.1;
  DType dtype = DType::f32;
  // Evaluation with gradients off: forward_fused runs the ReLU and residual add that
  // follow in the batch norm's own call, one pass over memory instead of three.
  bool fuse_eval = true;
  // Training: forward_fused runs them too, saving a ReLU bitmask for the backward, whose
  // batch norm backward masks the gradient itself (and returns the residual's,
  // residual_grad): a ResNet block's forward makes 4 passes over memory instead of 8.
  bool fuse_train = true;
  // Read by the networks that own the convolution before this batch norm (ResNet's stem
  // and blocks): they fold it into that convolution (Conv2d::fold_batch_norm), and in
  // evaluation with gradients off run the convolution alone; this takes precedence over
  // fuse_eval there.
  bool fold_into_conv = false;
  // Synchronised batch norm (PyTorch's SyncBatchNorm): in training, the statistics are
  // those of the rows of every replica of this group (data-parallel ranks: the union of
  // their batches), the running statistics follow them, and the backward is the gradient of
  // that batch norm (ops::BatchNormFwdArgs::sync). Null (the default): each replica's own
  // rows, PyTorch's BatchNorm2d under DistributedDataParallel; a group of one replica is the
  // same. Evaluation never communicates. dist::DataParallelOptions::sync_batch_norm sets it.
  ops::ChannelSumReducer* sync = nullptr;
};

// The batch norms of a tree, whatever their dispatch policy: what convert_sync_batch_norm
// finds.
class SyncableBatchNorm {
 public:
  // The next forward on (direct mode's plans keep their buffers; a captured CUDA graph keeps
  // what it captured: set it before graph mode's first step).
  virtual void set_sync(ops::ChannelSumReducer* group) = 0;
  virtual ops::ChannelSumReducer* sync() const = 0;

 protected:
  ~SyncableBatchNorm() = default;
};

// PyTorch's SyncBatchNorm.convert_sync_batchnorm: every batch norm of `root`'s tree
// synchronises its training statistics over `group` (null: each replica's own again).
// Returns how many batch norms it set.
int convert_sync_batch_norm(Module& root, ops::ChannelSumReducer* group);

namespace detail {
// BatchNorm2d's direct step (ops/direct/steps/batch_norm_step.h).
struct BatchNormStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::BatchNormStep<Impl>;
};
}  // namespace detail

template <class P>
class BatchNorm2d final : public Module, public SyncableBatchNorm {
 public:
  BatchNorm2d(const P& p, int64_t channels, const BatchNormOptions& o = {});
  std::string_view type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  // Whether forward_fused runs for x: a backend with batch norm in x's dtype, and either
  // evaluation with gradients off (nothing to differentiate) and options().fuse_eval, or
  // training, options().fuse_train and x dense (NCHW or channels-last: the ReLU mask's
  // order).
  bool fuses(const Tensor& x) const;
  // relu?(forward(x) + z) as one batch norm call (z optional, x's sizes, dtype and
  // layout); needs fuses(x). The blocks of a ResNet call it for each batch norm and the
  // ops after it. In training its backward takes the gradient of the fused output.
  Tensor forward_fused(const Tensor& x, const Tensor& z, bool relu);
  // Direct mode, after backward of a fused forward with z: the gradient of z (the
  // masked gradient at the residual add). The tape modes' tape routes it.
  const Tensor& residual_grad();

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const BatchNormOptions& options() const { return o_; }
  void set_sync(ops::ChannelSumReducer* group) override { o_.sync = group; }
  ops::ChannelSumReducer* sync() const override { return o_.sync; }
  int64_t num_batches_tracked() const;
  int64_t plans_made() const;

 private:
  void count_batch();
  // The group this forward synchronises over: none in evaluation.
  ops::ChannelSumReducer* forward_sync() const { return is_training() ? o_.sync : nullptr; }

  P p_;
  int64_t channels_;
  BatchNormOptions o_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
  [[no_unique_address]] detail::DirectLayer<P, detail::BatchNormStepOf> direct_;
};

}  // namespace strata::nn
