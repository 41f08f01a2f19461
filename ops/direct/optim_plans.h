#pragma once
// The optimizer's steps of a parameter group in direct and graph modes: validated with the
// front end's own functions (ops/validate.h) whenever the group's tensors differ from the last
// validated ones (their memory, dtype and sizes: a planned step keeps them, so once per shape),
// then one kernel call over the group's lists. What changes every step (the learning rate, the
// step counts) is not part of the check. Hyperparameters in device memory (graph mode) and the
// loss scale's state (amp) are the steps' optional arguments (op_args.h).
#include <span>
#include <vector>

#include "strata/ops/direct/kernel_call.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/validate.h"
#include "strata/ops/validate_adaptive_optim.h"
#include "strata/ops/validate_optim.h"

namespace strata::ops::direct {

namespace detail {
// What a group's validation depends on: each tensor's memory, dtype, device and sizes.
class ListsKey {
 public:
  template <class... Lists>
  bool update(const Lists&... lists) {
    size_t i = 0;
    bool same = true;
    auto compare = [&](std::span<const Tensor> ts) {
      for (const Tensor& t : ts) same = same && i < key_.size() && key_[i++] == entry(t);
    };
    (compare(lists), ...);
    if (same && i == key_.size()) return false;
    key_.clear();
    (append(lists), ...);
    return true;
  }

 private:
  struct Entry {
    const void* data = nullptr;
    DType dtype = DType::f32;
    Device device;
    Shape sizes;
    bool operator==(const Entry&) const = default;
  };
  static Entry entry(const Tensor& t) {
    return t.defined() ? Entry{t.data_ptr(), t.dtype(), t.device(), t.sizes()} : Entry{};
  }
  void append(std::span<const Tensor> ts) {
    for (const Tensor& t : ts) key_.push_back(entry(t));
  }
  std::vector<Entry> key_;
};
inline TensorView view_or_none(const Tensor& t) { return t.defined() ? TensorView(t) : TensorView(); }
inline void views_into(std::span<const Tensor> ts, std::vector<TensorView>& out) { out.assign(ts.begin(), ts.end()); }
}  // namespace detail

template <backends::BackendImpl Impl>
class MultiSgdStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> bufs,
           const SgdOptions& o, std::span<const Tensor> hypers, const Tensor& amp) {
    if (key_.update(p, g, bufs) || o.momentum != momentum_ || o.nesterov != nesterov_) {
      validate_multi_sgd_step(StaticDispatch<Impl>(impl), p, g, bufs, o);
      momentum_ = o.momentum;
      nesterov_ = o.nesterov;
    }
    detail::views_into(p, p_), detail::views_into(g, g_), detail::views_into(bufs, b_), detail::views_into(hypers, h_);
    for (const Tensor& t : p) t.note_write();
    run_kernel<OpId::multi_sgd_step>(impl, MultiSgdStepArgs{p_, g_, b_, h_, o, detail::view_or_none(amp)});
  }

 private:
  detail::ListsKey key_;
  double momentum_ = -1.0;
  bool nesterov_ = false;
  std::vector<TensorView> p_, g_, b_, h_;  // kept: no allocation once the lists have their size
};

template <backends::BackendImpl Impl>
class MultiAdamStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> m,
           std::span<const Tensor> v, std::span<const int64_t> steps, const AdamOptions& o,
           std::span<const Tensor> hypers, const Tensor& amp) {
    if (key_.update(p, g, m, v)) validate_multi_adam_step(StaticDispatch<Impl>(impl), p, g, m, v, steps);
    detail::views_into(p, p_), detail::views_into(g, g_), detail::views_into(m, m_), detail::views_into(v, v_),
        detail::views_into(hypers, h_);
    for (const Tensor& t : p) t.note_write();
    run_kernel<OpId::multi_adam_step>(impl, MultiAdamStepArgs{p_, g_, m_, v_, h_, steps, o, detail::view_or_none(amp)});
  }

 private:
  detail::ListsKey key_;
  std::vector<TensorView> p_, g_, m_, v_, h_;
};

template <backends::BackendImpl Impl>
class MultiRmspropStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sq,
           std::span<const Tensor> bufs, std::span<const Tensor> avgs, const RmspropOptions& o,
           std::span<const Tensor> hypers, const Tensor& amp) {
    if (key_.update(p, g, sq, bufs, avgs) || o.momentum != momentum_ || o.centered != centered_) {
      validate_multi_rmsprop_step(StaticDispatch<Impl>(impl), p, g, sq, bufs, avgs, o);
      momentum_ = o.momentum;
      centered_ = o.centered;
    }
    detail::views_into(p, p_), detail::views_into(g, g_), detail::views_into(sq, s_), detail::views_into(bufs, b_),
        detail::views_into(avgs, a_), detail::views_into(hypers, h_);
    for (const Tensor& t : p) t.note_write();
    const MultiRmspropStepArgs args{p_, g_, s_, b_, a_, h_, o, detail::view_or_none(amp)};
    run_kernel<OpId::multi_rmsprop_step>(impl, args);
  }

 private:
  detail::ListsKey key_;
  double momentum_ = -1.0;
  bool centered_ = false;
  std::vector<TensorView> p_, g_, s_, b_, a_, h_;
};

template <backends::BackendImpl Impl>
class MultiAdagradStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sums,
           std::span<const int64_t> steps, const AdagradOptions& o, std::span<const Tensor> hypers, const Tensor& amp) {
    if (key_.update(p, g, sums)) validate_multi_adagrad_step(StaticDispatch<Impl>(impl), p, g, sums, steps, o);
    detail::views_into(p, p_), detail::views_into(g, g_), detail::views_into(sums, s_), detail::views_into(hypers, h_);
    for (const Tensor& t : p) t.note_write();
    const MultiAdagradStepArgs args{p_, g_, s_, h_, steps, o, detail::view_or_none(amp)};
    run_kernel<OpId::multi_adagrad_step>(impl, args);
  }

 private:
  detail::ListsKey key_;
  std::vector<TensorView> p_, g_, s_, h_;
};

template <backends::BackendImpl Impl>
class MultiAdadeltaStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sq,
           std::span<const Tensor> acc, const AdadeltaOptions& o, std::span<const Tensor> hypers, const Tensor& amp) {
    if (key_.update(p, g, sq, acc)) validate_multi_adadelta_step(StaticDispatch<Impl>(impl), p, g, sq, acc, o);
    detail::views_into(p, p_), detail::views_into(g, g_), detail::views_into(sq, s_), detail::views_into(acc, a_),
        detail::views_into(hypers, h_);
    for (const Tensor& t : p) t.note_write();
    const MultiAdadeltaStepArgs args{p_, g_, s_, a_, h_, o, detail::view_or_none(amp)};
    run_kernel<OpId::multi_adadelta_step>(impl, args);
  }

 private:
  detail::ListsKey key_;
  std::vector<TensorView> p_, g_, s_, a_, h_;
};

}  // namespace strata::ops::direct
