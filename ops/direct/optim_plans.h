#pragma once
// The optimizer's steps of a parameter group in direct and graph modes: bound by the ops' one
// definitions (ops/bind/optim.h), the front end's, checked whenever the group's tensors differ
// from the last checked ones (their memory, dtype and sizes: a planned step keeps them, so once
// per shape), then one kernel call over the group's lists. What changes every step (the learning rate, the
// step counts) is not part of the check. Hyperparameters in device memory (graph mode) and the
// loss scale's state (amp) are the steps' optional arguments (op_args.h).
#include <span>
#include <vector>

#include "strata/ops/bind/optim.h"
#include "strata/ops/direct/kernel_call.h"
#include "strata/ops/dispatch.h"

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
}  // namespace detail

template <backends::BackendImpl Impl>
class MultiSgdStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> bufs,
           const SgdOptions& o, std::span<const Tensor> hypers, const Tensor& amp) {
    const bool check = key_.update(p, g, bufs) || o.momentum != momentum_ || o.nesterov != nesterov_;
    const auto b = bind::multi_sgd_step(StaticDispatch<Impl>(impl), views_, p, g, bufs, o, hypers, amp, check);
    momentum_ = o.momentum;
    nesterov_ = o.nesterov;
    for (const Tensor& t : p) t.note_write();
    run_kernel<OpId::multi_sgd_step>(impl, b.args);
  }

 private:
  detail::ListsKey key_;
  double momentum_ = -1.0;
  bool nesterov_ = false;
  bind::ListViews views_;  // kept: no allocation once the lists have their size
};

template <backends::BackendImpl Impl>
class MultiAdamStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> m,
           std::span<const Tensor> v, std::span<const int64_t> steps, const AdamOptions& o,
           std::span<const Tensor> hypers, const Tensor& amp) {
    const bool check = key_.update(p, g, m, v);
    const auto b = bind::multi_adam_step(StaticDispatch<Impl>(impl), views_, p, g, m, v, steps, o, hypers, amp, check);
    for (const Tensor& t : p) t.note_write();
    run_kernel<OpId::multi_adam_step>(impl, b.args);
  }

 private:
  detail::ListsKey key_;
  bind::ListViews views_;
};

template <backends::BackendImpl Impl>
class MultiRmspropStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sq,
           std::span<const Tensor> bufs, std::span<const Tensor> avgs, const RmspropOptions& o,
           std::span<const Tensor> hypers, const Tensor& amp) {
    const bool check = key_.update(p, g, sq, bufs, avgs) || o.momentum != momentum_ || o.centered != centered_;
    const auto b =
        bind::multi_rmsprop_step(StaticDispatch<Impl>(impl), views_, p, g, sq, bufs, avgs, o, hypers, amp, check);
    momentum_ = o.momentum;
    centered_ = o.centered;
    for (const Tensor& t : p) t.note_write();
    run_kernel<OpId::multi_rmsprop_step>(impl, b.args);
  }

 private:
  detail::ListsKey key_;
  double momentum_ = -1.0;
  bool centered_ = false;
  bind::ListViews views_;
};

template <backends::BackendImpl Impl>
class MultiAdagradStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sums,
           std::span<const int64_t> steps, const AdagradOptions& o, std::span<const Tensor> hypers, const Tensor& amp) {
    const bool check = key_.update(p, g, sums);
    const auto b =
        bind::multi_adagrad_step(StaticDispatch<Impl>(impl), views_, p, g, sums, steps, o, hypers, amp, check);
    for (const Tensor& t : p) t.note_write();
    run_kernel<OpId::multi_adagrad_step>(impl, b.args);
  }

 private:
  detail::ListsKey key_;
  bind::ListViews views_;
};

template <backends::BackendImpl Impl>
class MultiAdadeltaStepPlan {
 public:
  void run(Impl& impl, std::span<const Tensor> p, std::span<const Tensor> g, std::span<const Tensor> sq,
           std::span<const Tensor> acc, const AdadeltaOptions& o, std::span<const Tensor> hypers, const Tensor& amp) {
    const bool check = key_.update(p, g, sq, acc);
    const auto b = bind::multi_adadelta_step(StaticDispatch<Impl>(impl), views_, p, g, sq, acc, o, hypers, amp, check);
    for (const Tensor& t : p) t.note_write();
    run_kernel<OpId::multi_adadelta_step>(impl, b.args);
  }

 private:
  detail::ListsKey key_;
  bind::ListViews views_;
};

}  // namespace strata::ops::direct
