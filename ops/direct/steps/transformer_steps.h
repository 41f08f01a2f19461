#pragma once
// Direct mode's steps of GPT's layers (nn/layers/transformer.h runs them), over the plans of
// ops/direct/ (ops/direct/steps/plan_step.h says what a step is). Each mirrors the ops the tape
// modes record for the layer (nn/layers/transformer.cpp's tape formulas) with the same kernels
// on the same values, so that a step's outputs and gradients are bitwise the tape's; the
// reshapes the tape records are views planned once here.
#include <array>
#include <cmath>
#include <vector>

#include "strata/core/shape.h"
#include "strata/core/tensor.h"
#include "strata/ops/direct/memory_plans.h"
#include "strata/ops/direct/steps/gradients.h"
#include "strata/ops/direct/tensor_plans.h"
#include "strata/ops/direct/transformer_plans.h"
#include "strata/ops/tensor_ops.h"

namespace strata::ops::direct {

// Embedding (y = weight[ids]): index_select over the ids seen as one row of indices (the tape's
// ids.contiguous().view(n)); backward the front end's index_add (zeros, then the rows added).
// The ids' values are checked here and by the CPU kernels at each run, with the front end's
// message; non-contiguous ids are copied at each run into a buffer of the step's own (an
// ordinary one: its values are read at plan time).
template <class Impl>
class EmbeddingStep {
 public:
  void plan(Impl& impl, const Tensor& ids, const Tensor& weight) {
    impl_ = &impl;
    weight_ = weight;
    const Shape flat{ids.numel()};
    if (ids.is_contiguous()) {
      ids_ = ids.view(flat);
    } else {
      ids_ = Tensor::empty(flat, ids.dtype(), ids.device());
      copy_into(ids, ids_.view(ids.sizes()));
      ids_copy_.plan_into(impl, ids, ids_.view(ids.sizes()));
    }
    select_.plan(impl, weight, 0, ids_);
    Shape out = ids.sizes();
    out.push_back(weight.size(1));
    y_ = select_.y.view(out);
  }
  const Tensor& run(const Tensor& /*weight*/) {
    ids_copy_.run();
    select_.forward();
    return y_;
  }

  // dL/dweight from dy (ids' sizes + [dim]) into .grad(); `later` (or undefined): the gradient
  // of a later use of the weight, which the tape accumulates into .grad() first.
  void backward(const Tensor& dy, const Tensor& later) {
    if (needs_rebind(dy_, dy) || later.defined() != later_.defined() ||
        (later.defined() && needs_rebind(later_, later)))
      plan_backward(dy, later);
    run_backward();
  }

 private:
  void plan_backward(const Tensor& dy, const Tensor& later) {
    dy_ = dy;
    later_ = later;
    const Shape rows{ids_.numel(), weight_.size(1)};
    const Tensor g = planned_view_or_copy(*impl_, dy, rows, dy_copy_);
    // Tied, the lookup's gradient is summed with later's before .grad() takes it.
    const DType dt = dy.dtype();
    add_.plan(*impl_, g, 0, ids_, weight_.sizes(),
              later.defined() ? planned_empty(weight_.sizes(), dt, weight_.device())
                              : planned_grad(weight_, weight_.sizes(), dt));
    if (later.defined()) {
      sum_buf_ = planned_grad(weight_, weight_.sizes(), dt);
      sum_.plan(*impl_, later, add_.y, sum_buf_);
    }
  }
  void run_backward() {
    dy_copy_.run();
    if (!later_.defined()) {
      backward_into_grads(*impl_, {{weight_, add_.y}}, [&] { add_.forward(); });
      return;
    }
    add_.forward();
    // The engine: .grad() = later, then .grad() + lookup's; on a .grad() from an earlier
    // backward (not zeroed), (.grad() + later) + lookup's. The first is the planned sum; the
    // second allocates, as accumulating does in direct mode (never inside a captured step,
    // which zeroes the gradients first).
    if (recording()) return sum_.run();
    if (!weight_.grad().defined()) {
      sum_.run();
      weight_.set_grad(sum_buf_);
      return;
    }
    accumulate_grad(*impl_, weight_, later_);
    accumulate_grad(*impl_, weight_, add_.y);
  }

  Impl* impl_ = nullptr;
  Tensor weight_, ids_, y_, dy_, later_, sum_buf_;
  CastPlan<Impl> ids_copy_, dy_copy_;
  IndexSelectPlan<Impl> select_;
  IndexAddPlan<Impl> add_;
  AddIntoPlan<Impl> sum_;
};

// GPT's token and position embeddings summed, tok [B, T, C] + pos [T, C], and converted to the
// compute dtype (mixed precision): the tape's broadcast add (pos expanded over the batch) and
// cast. Backward: dy converted back (the cast's backward), which is tok's gradient, and pos's
// the sum of it over the broadcast dims (the expand's backward, a reduction kept to pos's rank,
// then viewed).
template <class Impl>
class EmbeddingSumStep {
 public:
  void plan(Impl& impl, const Tensor& tok, const Tensor& pos, DType compute) {
    impl_ = &impl;
    const Shape out = ops::broadcast_shape("add", tok.sizes(), pos.sizes());
    STRATA_CHECK(out == tok.sizes(), "GPT: position embeddings ", pos.str(), " do not broadcast to the tokens' ",
                 tok.str(), " (internal error)");
    pos_ = pos;
    add_.plan(impl, tok, ops::expand_to("expand", pos, out));
    y_ = add_.y;
    if (compute != tok.dtype()) {
      to_compute_.plan(impl, add_.y, compute);
      y_ = to_compute_.y;
    }
  }
  const Tensor& run(const Tensor& /*pos*/, DType /*compute*/) {
    add_.forward();
    to_compute_.run();
    return y_;
  }
  // The tokens' gradient (dy in their dtype); the positions' is pos_grad(). Planned on the
  // first call for dy and when dy moves.
  const Tensor& backward(const Tensor& dy) {
    if (needs_rebind(dy_, dy)) plan_backward(dy);
    to_params_.run();
    reduce_.forward();
    return dtok_;
  }
  const Tensor& pos_grad() const { return dpos_; }

 private:
  void plan_backward(const Tensor& dy) {
    dy_ = dy;
    dtok_ = dy;
    to_params_ = {};
    if (to_compute_.planned()) {
      to_params_.plan(*impl_, dy, pos_.dtype());
      dtok_ = to_params_.y;
    }
    std::vector<int> dims;  // the expand's: its new leading dims and those it repeated
    const int lead = dtok_.dim() - pos_.dim();
    for (int i = 0; i < dtok_.dim(); ++i)
      if (i < lead || (pos_.size(i - lead) == 1 && dtok_.size(i) != 1)) dims.push_back(i);
    STRATA_CHECK(!dims.empty(), "GPT: position embeddings ", pos_.str(), " are not broadcast (internal error)");
    reduce_.plan(*impl_, ops::ReduceFn::sum, dtok_, dims);
    dpos_ = reduce_.y.view(pos_.sizes());
  }

  Impl* impl_ = nullptr;
  Tensor pos_, y_, dy_, dtok_, dpos_;
  AddPlan<Impl> add_;
  CastPlan<Impl> to_compute_, to_params_;
  ReducePlan<Impl> reduce_;
};

// The heads of a fused QKV projection's output qkv [B, T, 3C]: [B, T, H, D] <-> [B, H, T, D].
inline const std::vector<int> kQkvHeads{0, 2, 1, 3};

// q, k and v of qkv as [B, H, T, D] for dims {B, T, H, D}: views of its three slices (the tape's
// slice, reshape and transpose), or planned copies into `copies` where the layout needs them.
template <class Impl>
std::array<Tensor, 3> plan_qkv_heads(Impl& impl, const Tensor& qkv, const Shape& dims, CastPlan<Impl> (&copies)[3]) {
  const int64_t C = dims[2] * dims[3];
  std::array<Tensor, 3> qkv_heads;
  for (int i = 0; i < 3; ++i)
    qkv_heads[i] = planned_view_or_copy(impl, qkv.narrow(2, i * C, C), dims, copies[i]).permute(kQkvHeads);
  return qkv_heads;
}

// Causal self-attention over the QKV projection's output qkv [B, T, 3C] with `heads` heads: q,
// k and v are views of its three slices as [B, H, T, D] (the tape's slice, reshape and
// transpose), y is [B, T, C] over the attention's output (its heads side by side, as the tape's
// transpose and reshape see it). Backward reads dy through the same views and writes the
// gradients of q, k and v into their slices of one [B, T, 3C] buffer.
template <class Impl>
class AttentionStep {
 public:
  void plan(Impl& impl, const Tensor& qkv, int64_t heads) {
    impl_ = &impl;
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
    dims_ = {B, T, heads, C / heads};
    const auto [q, k, v] = plan_qkv_heads(impl, qkv, dims_, copies_);
    attn_.plan(impl, q, k, v, true, 1.0 / std::sqrt(static_cast<double>(dims_[3])));
    y_ = attn_.y.permute(kQkvHeads).view({B, T, C});
  }
  const Tensor& run(int64_t /*heads*/) {
    for (auto& c : copies_) c.run();
    attn_.forward();
    return y_;
  }
  void plan_backward(const Tensor& dy, bool /*need_dx*/) {
    const Tensor dy4 = planned_view_or_copy(*impl_, dy, dims_, dy_copy_).permute(kQkvHeads);
    dqkv_ = planned_empty({dims_[0], dims_[1], 3 * dims_[2] * dims_[3]}, dy.dtype(), dy.device());
    // A dense buffer's slices split into heads are views.
    auto grad = [&](int i) {
      const Tensor part = slice(dqkv_, i);
      return part.as_strided(dims_, *view_strides(part.sizes(), part.strides(), dims_), part.offset())
          .permute(kQkvHeads);
    };
    attn_.plan_backward(dy4, grad(0), grad(1), grad(2));
  }
  const Tensor& run_backward() {
    dy_copy_.run();
    attn_.backward();
    return dqkv_;
  }

 private:
  // Slice i (q, k, v) of t [B, T, 3C].
  Tensor slice(const Tensor& t, int i) const {
    const int64_t C = dims_[2] * dims_[3];
    return t.narrow(2, i * C, C);
  }

  Impl* impl_ = nullptr;
  Shape dims_;  // B, T, H, D
  Tensor y_, dqkv_;
  CastPlan<Impl> copies_[3], dy_copy_;
  AttentionPlan<Impl> attn_;
};

// GPT's output projection, tied to wte's weight W [V, C]: logits = x W^T as the tape's matmul
// computes it, one batched product of x's rows [1, N, C] and W^T's view [1, C, V] (of W's copy
// in x's dtype, mixed precision). Backward as its bmm node: dx = dy W, then W's gradient
// (x^T dy) [C, V] copied transposed into a [V, C] buffer and converted to W's dtype, which the
// caller hands to the embedding (nn::Embedding::backward_tied) rather than .grad().
// With a padded vocabulary Vp > V (nn::GptConfig::padded_vocab) it mirrors the tape's padding: W is
// converted into the first V rows of a [Vp, C] buffer whose other rows are zero (the tape's cat
// with zero rows), the product writes [N, Vp] and the logits are its first V columns (the
// tape's slice); backward puts dy into the first V columns of a [N, Vp] buffer whose others are
// zero (the slice's backward), so that every product's dimensions and leading dimensions are
// multiples of the padding, and W's gradient is the first V rows of the padded one.
template <class Impl>
class TiedProjectionStep {
 public:
  void plan(Impl& impl, const Tensor& x, const Tensor& weight, int64_t padded) {
    impl_ = &impl;
    weight_ = weight;
    const int64_t c = x.size(x.dim() - 1);
    v_ = weight.size(0);
    vp_ = padded;
    x_sizes_ = x.sizes();
    n_ = x.numel() / c;
    a_ = planned_view_or_copy(impl, x, {1, n_, c}, x_copy_);
    Tensor w;
    if (vp_ > v_) {  // W in x's dtype straight into the padded rows: the same values as the tape's cast, then cat
      w = planned_empty({vp_, c}, x.dtype(), x.device());
      w_rows_.plan_into(impl, weight, w.narrow(0, 0, v_));
      w_pad_ = w.narrow(0, v_, vp_ - v_);
    } else {
      w = w_.plan(impl, weight, x);
    }
    const Tensor wt = w.permute({1, 0});
    const auto st = view_strides(wt.sizes(), wt.strides(), {1, c, vp_});
    STRATA_CHECK(st.has_value(), "GPT: the output projection reads wte's weight in place, which needs a dense "
                                 "weight, got ", weight.str());
    b_ = wt.as_strided({1, c, vp_}, *st, wt.offset());
    fwd_.plan(impl, a_, b_);
    Shape out = x.sizes();
    out[out.size() - 1] = vp_;
    y_ = fwd_.y.view(out);
    if (vp_ > v_) y_ = y_.narrow(y_.dim() - 1, 0, v_);
  }
  const Tensor& run(const Tensor& /*weight*/, int64_t /*padded*/) {
    w_.refresh();
    w_rows_.run();
    // Rewritten at each run: the buffer is the step's, whose memory other buffers may share between runs.
    if (w_pad_.defined()) fill_now(*impl_, w_pad_, 0.0);
    x_copy_.run();
    fwd_.forward();
    return y_;
  }
  // dL/dx; the weight's gradient is weight_grad(). Planned on the first call for dy and when dy moves.
  const Tensor& backward(const Tensor& dy) {
    if (needs_rebind(dy_, dy)) plan_backward(dy);
    dy_copy_.run();
    if (dy_pad_.defined()) fill_now(*impl_, dy_pad_, 0.0);
    da_.forward();
    db_.forward();
    transpose_.run();
    to_params_.run();
    return dx_;
  }
  const Tensor& weight_grad() const { return dw_; }

 private:
  void plan_backward(const Tensor& dy) {
    dy_ = dy;
    const int64_t c = a_.size(2);
    Tensor g;
    dy_pad_ = {};
    if (vp_ > v_) {
      // dL/dlogits as the loss hands them: the first V columns of rows of Vp (SoftmaxXentPlan).
      // When that buffer is the step's own, the products read it in place, its padding columns
      // zeroed (a copy of the 16,384 x 50,304 bf16 gradient took about 1 ms a step on an H200);
      // else whole rows are copied (one dense copy: a row of 50,257 bf16 values copied one
      // element at a time took 2.8 ms), or the columns, and the padding zeroed after them.
      const auto rows = view_strides(dy.sizes(), dy.strides(), {1, n_, v_});
      const size_t padded_bytes = static_cast<size_t>(dy.offset() + n_ * vp_) * dtype_size(dy.dtype());
      const bool whole_rows =
          rows && (*rows)[1] == vp_ && (*rows)[2] == 1 && padded_bytes <= dy.impl().storage->bytes();
      const Tensor dy_rows = whole_rows ? dy.as_strided({1, n_, vp_}, {n_ * vp_, vp_, 1}, dy.offset()) : Tensor();
      dy_copy_ = {};
      if (whole_rows && planned_in_step(dy)) {
        g = dy_rows;
      } else {
        g = planned_empty({1, n_, vp_}, dy.dtype(), dy.device());
        const Tensor cols = g.narrow(2, 0, v_);
        const auto st = view_strides(cols.sizes(), cols.strides(), dy.sizes());
        STRATA_CHECK(st.has_value(), "GPT: backward: dlogits ", dy.str(), " are not the logits' sizes");
        if (whole_rows)
          dy_copy_.plan_into(*impl_, dy_rows, g);
        else
          dy_copy_.plan_into(*impl_, dy, cols.as_strided(dy.sizes(), *st, cols.offset()));
      }
      dy_pad_ = g.narrow(2, v_, vp_ - v_);
    } else {
      g = planned_view_or_copy(*impl_, dy, {1, n_, v_}, dy_copy_);
    }
    da_.plan(*impl_, g, b_.permute({0, 2, 1}));
    dx_ = da_.y.view(x_sizes_);
    db_.plan(*impl_, a_.permute({0, 2, 1}), g);
    dw_ = planned_empty({v_, c}, dy.dtype(), dy.device());
    transpose_.plan_into(*impl_, db_.y.view({c, vp_}).narrow(1, 0, v_).permute({1, 0}), dw_);
    to_params_ = {};
    if (dw_.dtype() != weight_.dtype()) {  // step-local: the embedding sums it into the gradient
      to_params_.plan(*impl_, dw_, weight_.dtype());
      dw_ = to_params_.y;
    }
  }

  Impl* impl_ = nullptr;
  Shape x_sizes_;
  int64_t n_ = 0, v_ = 0, vp_ = 0;
  Tensor weight_, a_, b_, y_, dy_, dx_, dw_;
  Tensor w_pad_, dy_pad_;  // the padded rows of W's copy and columns of dy's (zero at each run)
  ParamCast<Impl> w_;
  CastPlan<Impl> x_copy_, w_rows_, dy_copy_, transpose_, to_params_;
  BmmPlan<Impl> fwd_, da_, db_;
};

}  // namespace strata::ops::direct
