// Backward formulas of the losses and reductions.
#include "strata/autograd/node_base.h"

namespace strata::autograd {
using detail::NodeT;
using detail::record;

namespace {

// Keeps the logits (the tape's handle on the layer's output, not a copy) and their [N]
// log-sum-exp: the backward recomputes the softmax rather than keep an [N, C] one.
template <class D>
class SoftmaxXentNode final : public NodeT<D> {
 public:
  SoftmaxXentNode(const D& d, Tensor logits, Tensor lse, Tensor labels, int64_t ignore_index)
      : NodeT<D>(d), logits_(std::move(logits)), lse_(std::move(lse)), labels_(std::move(labels)),
        ignore_index_(ignore_index) {}
  std::string_view name() const override { return "softmax_xent"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    return {ops::softmax_xent_bwd(this->d_, logits_, lse_, labels_, g, ignore_index_)};
  }
  void release() override { logits_ = lse_ = labels_ = Tensor(); }

 private:
  Tensor logits_, lse_, labels_;
  int64_t ignore_index_;
};

template <class D>
class BceLogitsNode final : public NodeT<D> {
 public:
  BceLogitsNode(const D& d, Tensor logits, Tensor targets) : NodeT<D>(d), logits_(std::move(logits)), targets_(std::move(targets)) {}
  std::string_view name() const override { return "bce_logits"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {ops::bce_logits_bwd(this->d_, logits_, targets_, g)}; }
  void release() override { logits_ = targets_ = Tensor(); }

 private:
  Tensor logits_, targets_;
};

// d(sum)/dx = g everywhere; d(mean)/dx = g/n. The scalar g is read on the host:
// one synchronisation, acceptable for the op that usually ends a graph.
template <class D>
class ReduceNode final : public NodeT<D> {
 public:
  ReduceNode(const D& d, Tensor x, bool mean) : NodeT<D>(d), sizes_(x.sizes()), dtype_(x.dtype()), mean_(mean) {}
  std::string_view name() const override { return mean_ ? "mean" : "sum"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    const double v = g.item() / (mean_ ? static_cast<double>(sizes_.numel()) : 1.0);
    return {ops::full(this->d_, sizes_, dtype_, v)};
  }
  void release() override {}

 private:
  Shape sizes_;
  DType dtype_;
  bool mean_;
};

}  // namespace

template <class D>
Tensor softmax_xent(const D& d, const Tensor& logits, const Tensor& labels, int64_t ignore_index) {
  ops::SoftmaxXentOut o = ops::softmax_xent(d, logits, labels, ignore_index);
  record<SoftmaxXentNode<D>>(d, {&logits}, o.loss, logits, o.lse, labels, ignore_index);
  return o.loss;
}

template <class D>
Tensor bce_logits(const D& d, const Tensor& logits, const Tensor& targets) {
  STRATA_CHECK(!targets.requires_grad(), "bce_logits: gradients with respect to targets are not supported (",
               targets.str(), ")");
  Tensor loss = ops::bce_logits(d, logits, targets);
  record<BceLogitsNode<D>>(d, {&logits}, loss, logits, targets);
  return loss;
}

template <class D>
Tensor sum(const D& d, const Tensor& x) {
  Tensor y = ops::sum(d, x);
  record<ReduceNode<D>>(d, {&x}, y, x, false);
  return y;
}

template <class D>
Tensor mean(const D& d, const Tensor& x) {
  Tensor y = ops::mean(d, x);
  record<ReduceNode<D>>(d, {&x}, y, x, true);
  return y;
}

#define STRATA_AUTOGRAD_INSTANTIATE(D)                                          \
  template Tensor softmax_xent<D>(const D&, const Tensor&, const Tensor&, int64_t); \
  template Tensor bce_logits<D>(const D&, const Tensor&, const Tensor&);       \
  template Tensor sum<D>(const D&, const Tensor&);                             \
  template Tensor mean<D>(const D&, const Tensor&);
STRATA_AUTOGRAD_INSTANTIATE_ALL()

}  // namespace strata::autograd
