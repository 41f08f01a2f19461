#pragma once
// ReLU and Dropout.
// Dropout (torch.nn.Dropout): in training, zeroes each element with probability p
// and scales the rest by 1/(1-p); identity in eval or with p = 0. Its mask comes from
// a counter-based hash of (seed, offset + element index) (ops/table/op_args.h), so
// every backend and every dispatch mode draws the same mask; each training forward
// advances the offset by the number of elements. In graph mode each launch of a
// captured step is a draw: its kernel reads seed and offset from device memory that
// is written, and the offset advanced, before every launch.

#include "strata/nn/layers/direct_layer.h"
#include "strata/ops/direct/dropout_plan.h"

namespace strata::nn {

namespace detail {
struct DropoutStepOf {
  template <backends::BackendImpl Impl>
  using type = ops::direct::DropoutPlan<Impl>;
};
}  // namespace detail

template <class P>
class ReLU final : public Module {
 public:
  explicit ReLU(const P& p) : p_(p) {}
  std::string_view type_name() const override { return "ReLU"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  P p_;
  [[no_unique_address]] detail::DirectLayer<P, ops::direct::PlanOf<ops::direct::ReluPlan>> direct_;
};

// What every Dropout<P> draws from, whatever its policy: a trainer seeds and saves it for an
// exact resume (its position is not in the state dict) without knowing the dispatch mode.
class DropoutDraws : public Module {
 public:
  std::string_view type_name() const override { return "Dropout"; }
  double prob() const { return prob_; }
  void set_seed(uint64_t seed, uint64_t offset = 0) { counter_ = {seed, offset}; }
  uint64_t offset() const { return counter_.offset; }

 protected:
  DropoutDraws(double prob, uint64_t seed) : prob_(prob), counter_{seed, 0} {}
  double prob_;
  ops::direct::DropoutCounter counter_;
};

template <class P>
class Dropout final : public DropoutDraws {
 public:
  Dropout(const P& p, double prob, uint64_t seed = 0);
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  P p_;
  bool last_active_ = false;
  [[no_unique_address]] detail::DirectLayer<P, detail::DropoutStepOf> direct_;
};

}  // namespace strata::nn
