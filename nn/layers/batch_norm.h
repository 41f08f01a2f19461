#pragma once
// BatchNorm2d over the channels of [N,C,H,W], as torch.nn.BatchNorm2d (affine,
// track_running_stats): parameters weight (gamma), bias (beta); buffers
// running_mean, running_var, num_batches_tracked. Training normalises with batch
// statistics and updates the running ones (momentum 0.1, unbiased variance);
// eval uses the running statistics.
// num_batches_tracked is an i64 scalar kept on the host whatever the device: no
// kernel reads it (momentum is set), it exists so state dicts match PyTorch's.
#include "strata/nn/layers/layer_util.h"
#include "strata/ops/direct/cast_plans.h"
#include "strata/ops/direct/plans.h"

namespace strata::nn {

struct BatchNormOptions {
  double eps = 1e-5, momentum = 0.1;
  DType dtype = DType::f32;
};

namespace detail {
template <class P>
struct BatchNormDirect : NoDirectState {};
template <class Impl>
struct BatchNormDirect<Direct<Impl>> {
  struct Entry {
    ops::direct::BatchNormPlan<Impl> plan;
    Tensor dy;
    // Mixed precision without a native batch norm for the pair: x and dy into the
    // parameters' dtype, y and dx back (as the tape modes' casts do).
    ops::direct::CastPlan<Impl> x_in, y_out, dy_in, dx_out;
  };
  PlanCache<Entry> cache;
};
}  // namespace detail

template <class P>
class BatchNorm2d final : public Module {
 public:
  BatchNorm2d(const P& p, int64_t channels, const BatchNormOptions& o = {});
  std::string_view type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const BatchNormOptions& options() const { return o_; }
  int64_t num_batches_tracked() const;
  int64_t plans_made() const;

 private:
  P p_;
  int64_t channels_;
  BatchNormOptions o_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
  [[no_unique_address]] detail::BatchNormDirect<P> direct_;
};

}  // namespace strata::nn
