#pragma once
// ReLU and Dropout.
// Dropout (torch.nn.Dropout): in training, zeroes each element with probability p
// and scales the rest by 1/(1-p); identity in eval or with p = 0. Its mask comes from
// a counter-based hash of (seed, offset + element index) (ops/table/op_args.h), so
// every backend and every dispatch mode draws the same mask; each training forward
// advances the offset by the number of elements. In graph mode each launch of a
// captured step is a draw: its kernel reads seed and offset from device memory that
// is written, and the offset advanced, before every launch.
#include <memory>

#include "strata/nn/layers/direct_layer.h"

namespace strata::nn {

namespace detail {
// Where a Dropout layer draws next.
struct DropoutCounter {
  uint64_t seed = 0, offset = 0;
};
// Dropout's direct step: a planned mask and output; seed and offset are read at every
// run, or, inside a graph capture, at every launch of the graph.
template <class Impl>
class DropoutStep {
 public:
  void plan(Impl& impl, const Tensor& x, double prob, DropoutCounter* counter, uint64_t offset);
  const Tensor& run(double prob, DropoutCounter* counter, uint64_t offset);
  void plan_backward(const Tensor& dy, bool need_dx);
  const Tensor& run_backward();

 private:
  Impl* impl_ = nullptr;
  Tensor y_, mask_, dx_;
  // Graph mode: {seed, offset} on the device and its host staging, shared with the
  // launches' writes (a graph may outlive this step in the plan cache).
  struct Rng {
    Tensor host, device;
  };
  std::shared_ptr<Rng> rng_;
  ops::DropoutFwdArgs fwd_;
  ops::DropoutBwdArgs bwd_;
};
struct DropoutStepOf {
  template <backends::BackendImpl Impl>
  using type = DropoutStep<Impl>;
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
  [[no_unique_address]] detail::DirectLayer<P, detail::PlanOf<ops::direct::ReluPlan>> direct_;
};

template <class P>
class Dropout final : public Module {
 public:
  Dropout(const P& p, double prob, uint64_t seed = 0);
  std::string_view type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  double prob() const { return prob_; }
  void set_seed(uint64_t seed, uint64_t offset = 0) { counter_ = {seed, offset}; }
  uint64_t offset() const { return counter_.offset; }

 private:
  P p_;
  double prob_;
  detail::DropoutCounter counter_;
  bool last_active_ = false;
  [[no_unique_address]] detail::DirectLayer<P, detail::DropoutStepOf> direct_;
};

}  // namespace strata::nn
