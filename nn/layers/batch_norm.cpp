#include "strata/nn/layers/batch_norm.h"

#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops/direct/graph_capture.h"
#include "strata/ops/shape_rules.h"

namespace strata::nn {

template <class P>
BatchNorm2d<P>::BatchNorm2d(const P& p, int64_t channels, const BatchNormOptions& o)
    : p_(p), channels_(channels), o_(o) {
  STRATA_CHECK(channels > 0, "BatchNorm2d: channels must be positive, got ", channels);
  const Device dev = p_.device();
  weight_ = register_parameter("weight", detail::make_filled(dev, Shape{channels}, o.dtype, 1.0));
  bias_ = register_parameter("bias", detail::make_filled(dev, Shape{channels}, o.dtype, 0.0));
  running_mean_ = register_buffer("running_mean", detail::make_filled(dev, Shape{channels}, o.dtype, 0.0));
  running_var_ = register_buffer("running_var", detail::make_filled(dev, Shape{channels}, o.dtype, 1.0));
  num_batches_tracked_ =
      register_buffer("num_batches_tracked", detail::make_filled(Device::cpu(), Shape{}, DType::i64, 0.0));
}

template <class P>
std::string BatchNorm2d<P>::extra_repr() const {
  return std::to_string(channels_) + ", eps=" + std::to_string(o_.eps) + ", momentum=" + std::to_string(o_.momentum);
}

template <class P>
int64_t BatchNorm2d<P>::num_batches_tracked() const {
  return *num_batches_tracked_.data<int64_t>();
}

// A memory plan's recording pass runs a forward once more; it is not a batch. A captured
// step counts each launch.
template <class P>
void BatchNorm2d<P>::count_batch() {
  if (ops::direct::recording()) return;
  if (ops::direct::capturing())
    ops::direct::at_each_launch([count = num_batches_tracked_.data<int64_t>()] { ++*count; });
  else
    ++*num_batches_tracked_.data<int64_t>();
}

template <class P>
Tensor BatchNorm2d<P>::forward(const Tensor& x) {
  const bool training = is_training();
  if (training) count_batch();
  ops::ChannelSumReducer* const sync = forward_sync();
  return direct_.forward_keyed(
      p_, x, training ? 1 : 0,
      [&](const auto& tape) {
        if (ops::direct::batch_norm_needs_casts(tape.capabilities(), x, weight_.dtype())) {
          // Statistics, affine parameters and the normalisation in the parameters' dtype
          // (f32), the output back in the input's dtype and layout, at two extra passes
          // over the activation.
          const Tensor xc = autograd::cast(tape, x, weight_.dtype(), MemoryFormat::contiguous);
          const Tensor y = autograd::batch_norm(tape, xc, weight_, bias_, running_mean_, running_var_, training,
                                                o_.momentum, o_.eps, Tensor(), false, sync);
          return autograd::cast(tape, y, x.dtype(), x.suggested_format());
        }
        return autograd::batch_norm(tape, x, weight_, bias_, running_mean_, running_var_, training, o_.momentum,
                                    o_.eps, Tensor(), false, sync);
      },
      weight_, bias_, running_mean_, running_var_, training, o_.momentum, o_.eps, Tensor(), false, sync);
}

template <class P>
bool BatchNorm2d<P>::fuses(const Tensor& x) const {
  if (is_training() ? !(o_.fuse_train && ops::dense_for_mask(x))
                    : !o_.fuse_eval || autograd::GradMode::enabled())
    return false;
  if constexpr (is_direct_v<P>)
    return !ops::direct::batch_norm_needs_casts(p_.impl->capabilities(), x, weight_.dtype());
  else
    return !ops::direct::batch_norm_needs_casts(p_.capabilities(), x, weight_.dtype());
}

template <class P>
Tensor BatchNorm2d<P>::forward_fused(const Tensor& x, const Tensor& z, bool relu) {
  STRATA_CHECK(fuses(x), "BatchNorm2d::forward_fused: runs in training with fuse_train on and a dense NCHW or "
               "channels-last input, or in evaluation with gradients off and fuse_eval on, on a backend with batch "
               "norm in ", dtype_name(x.dtype()), "; call forward");
  const bool training = is_training();
  if (training) count_batch();
  ops::ChannelSumReducer* const sync = forward_sync();
  // Plans for the same x told apart by what follows: keys 2 and up (forward's are 0 and 1).
  const auto z_at = z.defined() ? reinterpret_cast<uintptr_t>(z.data_ptr()) : uintptr_t{0};
  const auto key = static_cast<int64_t>((z_at << 3) + (training ? 4 : 0) + (relu ? 3 : 2));
  return direct_.forward_keyed(
      p_, x, key,
      [&](const auto& tape) {
        return autograd::batch_norm(tape, x, weight_, bias_, running_mean_, running_var_, training, o_.momentum,
                                    o_.eps, z, relu, sync);
      },
      weight_, bias_, running_mean_, running_var_, training, o_.momentum, o_.eps, z, relu, sync);
}

template <class P>
const Tensor& BatchNorm2d<P>::residual_grad() {
  if constexpr (is_direct_v<P>) {
    const Tensor& dz = direct_.latest_step(type_name()).residual_grad();
    STRATA_CHECK(dz.defined(), "BatchNorm2d::residual_grad: the latest forward had no residual input, or its "
                 "backward has not run");
    return dz;
  } else {
    STRATA_FAIL("BatchNorm2d::residual_grad runs in direct mode only; in the tape modes the tape routes it");
  }
}

template <class P>
Tensor BatchNorm2d<P>::backward(const Tensor& dy) {
  return direct_.backward(*this, dy);
}

template <class P>
int64_t BatchNorm2d<P>::plans_made() const {
  return direct_.plans_made();
}

int convert_sync_batch_norm(Module& root, ops::ChannelSumReducer* group) {
  int n = 0;
  for (const auto& [name, m] : root.named_modules())
    if (auto* bn = dynamic_cast<SyncableBatchNorm*>(m)) {
      bn->set_sync(group);
      ++n;
    }
  return n;
}

#define STRATA_NN_INSTANTIATE(P) template class BatchNorm2d<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
