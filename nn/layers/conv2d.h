#pragma once
#include <array>
// Conv2d: y = conv2d(x, weight, bias), weight [out, in/groups, k, k], bias [out]
// (optional), as torch.nn.Conv2d with square kernel, stride, padding and dilation.
#include <vector>

#include "strata/nn/layers/batch_norm.h"
#include "strata/nn/layers/direct_layer.h"

namespace strata::nn {

struct Conv2dOptions {
  int stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
  DType dtype = DType::f32;
  // With gradients off, forward_fused runs the residual add and ReLU that follow in the
  // convolution's own call (the inference epilogue, ops::conv2d_fused); false: it refuses.
  bool fuse_epilogue = true;
};

template <class P>
class Conv2d final : public Module {
 public:
  // Parameters start as torch.nn.Conv2d's (nn/init.h, init::reset_parameters).
  Conv2d(const P& p, int64_t in_channels, int64_t out_channels, int kernel_size, const Conv2dOptions& o = {});
  std::string_view type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

  // The inference epilogue. fuses(): gradients are off (nothing to differentiate; a
  // backward through the fused call is refused) and options' fuse_epilogue is on.
  // forward_fused = relu?(forward(x) + z) as one convolution call (z optional, the
  // output's sizes and dtype): conv + bias + ReLU for any Conv2d followed by a ReLU, and
  // a ResNet block's residual add.
  bool fuses() const;
  Tensor forward_fused(const Tensor& x, const Tensor& z, bool relu);

  // Batch-norm folding. fold_batch_norm(bn): `bn` follows this convolution; from then on,
  // in evaluation with gradients off (folds()), forward_folded(x, z, relu) computes
  // relu?(bn(forward(x)) + z) as one convolution call with the folded parameters
  //   w' = w * s, b' = beta + (b - running_mean) * s, s = gamma / sqrt(running_var + eps)
  // per output channel (computed in double, stored in the weight's dtype, and for a
  // mixed-precision forward in its input's dtype too, converted from those at each fold
  // rather than at each forward). They are kept
  // beside the parameters, not registered: the state dict and the optimizers see only
  // the unfolded weight, bias and bn's tensors, and training (or evaluation with
  // gradients on) runs the separate convolution and batch norm on them. The folded copy
  // is recomputed when the module enters evaluation (eval()), after load_state_dict, and
  // at the first folded forward after a forward with gradients on (an optimizer step may
  // have followed it); weights changed in place otherwise need eval() again. The copies
  // are made at the first fold (entering evaluation, or the first folded forward): a
  // model that only trains holds none (ResNet-50 in f32: 90 MiB).
  void fold_batch_norm(const BatchNorm2d<P>& bn);
  bool folds() const;
  // z_dead: the caller no longer reads z, so the output may be written over it where the
  // backend accumulates a residual in place (Capabilities::accumulates_residual_in_place:
  // onednn, whose residual otherwise goes through a copy into the output first) and z is
  // the output's dense buffer in x's dtype and layout; the returned tensor is then z.
  Tensor forward_folded(const Tensor& x, const Tensor& z, bool relu, bool z_dead = false);
  // The weight the folded forward runs (rearranged in the space-to-depth form); undefined
  // before the first fold.
  const Tensor& folded_weight() const { return folded_w_; }
  const Tensor& folded_bias() const { return folded_b_; }

  // Space-to-depth: a stride-s convolution of at most 16 / (s * s) input channels (the
  // ImageNet stem's 7x7 stride 2 over 3) runs as a stride-1 convolution over x's s x s
  // pixel blocks (ops::space_to_depth, the channels padded to a multiple of 8), its weight
  // rearranged to [out, blocks' channels, ceil(k / s), ceil(k / s)]: in training by the same
  // op (its gradient comes back through the op's adjoint), folded at each fold. The
  // parameters and the state dict keep the plain form; forward_fused (the unfolded
  // epilogue) runs it. No convolution engine of cuDNN runs 3 input channels well: the stem
  // took 1.84 ms against 0.77 ms in this form (H100, b256 bf16, docs/results/gpu_fused_eval.md).
  // Set before the first fold. Refused where it does not fit (space_to_depth_fits: groups 1,
  // no dilation, the same stride s >= 2 and padding both ways).
  bool space_to_depth_fits() const;
  void set_space_to_depth(bool on);
  bool space_to_depth() const { return s2d_; }
  // Winograd: the folded forward's Conv2dParams::winograd (a backend may run a 3x3 stride-1
  // convolution by a Winograd transform; onednn does).
  void set_folded_winograd(bool on);

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias
  const ops::Conv2dParams& conv_params() const { return cp_; }
  int64_t plans_made() const;  // direct mode: how many plans this layer made; 0 otherwise

 protected:
  void on_train(bool on) override;
  void on_load() override;
  void on_memory_format(MemoryFormat fmt) override;
  void on_refresh_derived() override;

 private:
  Tensor run_fused(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& z, bool relu, bool folded,
                   const ops::Conv2dParams& cp, bool into_z = false);
  void refold();
  // The stamps of the tensors the folded copies are made from (the weight, the bias, the
  // batch norm's four): a changed one means they are stale.
  using FoldSources = std::array<Tensor::Stamp, 6>;
  FoldSources fold_sources() const;
  bool fold_current() const { return !fold_stale_ && fold_sources() == folded_from_; }
  // The space-to-depth form: x's pixel blocks (as many as the convolution reads), the
  // weight's, and the training forward over them.
  int64_t block_kernel() const;  // ceil(kernel / stride)
  ops::SpaceToDepthParams blocks(int pad, int64_t out_h, int64_t out_w) const;
  ops::SpaceToDepthParams block_params(const Tensor& x) const;
  ops::SpaceToDepthParams weight_block_params() const;
  ops::Conv2dParams blocks_cp() const;  // over the blocks: stride 1, no padding
  ops::Conv2dParams folded_cp() const;  // the folded forward's, with the Winograd permission
  Tensor to_blocks(const Tensor& x);
  Tensor forward_blocks(const Tensor& x);
  std::vector<double> rearranged_for_blocks(const std::vector<double>& w) const;

  P p_;
  int64_t in_, out_;
  int kernel_;
  bool fuse_epilogue_;
  ops::Conv2dParams cp_;
  bool s2d_ = false;            // set_space_to_depth
  bool winograd_ = false;       // set_folded_winograd
  bool latest_blocks_ = false;  // the latest forward ran the space-to-depth form (its backward follows)
  Tensor weight_, bias_;
  detail::EvalCast weight_cast_, bias_cast_;  // mixed-precision evaluation of the plain form, tape modes
  const BatchNorm2d<P>* fold_bn_ = nullptr;
  Tensor folded_w_, folded_b_;  // written in place, so direct plans and captured graphs stay bound
  struct FoldedCopy {
    Tensor w, b;
  };
  std::vector<FoldedCopy> folded_copies_;  // in the other dtypes forwards computed in (bf16, f16)
  bool fold_stale_ = true;
  FoldSources folded_from_{};  // fold_sources() at the latest fold
  uint64_t fold_id_ = 0;  // ops::Conv2dFwdArgs::w_version of the folded weights: new at each fold
  [[no_unique_address]] detail::DirectLayer<P, detail::Conv2dStepOf> direct_;
  [[no_unique_address]] detail::DirectLayer<P, ops::direct::PlanOf<ops::direct::SpaceToDepthPlan>> s2d_direct_;
  [[no_unique_address]] detail::DirectLayer<P, detail::SpaceToDepthConvStepOf> s2d_conv_direct_;
};

}  // namespace strata::nn
