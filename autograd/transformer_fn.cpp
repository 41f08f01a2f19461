// Backward formulas of layer norm and attention: the backend's bwd rows, which read the
// statistics the forward saved (mean and rstd; attention's log-sum-exp).
#include <cmath>

#include "strata/autograd/node_base.h"
#include "strata/autograd/transformer_functions.h"
#include "strata/ops/transformer_ops.h"

namespace strata::autograd {
using detail::NodeT;
using detail::record;

namespace {

template <class D>
class LayerNormNode final : public NodeT<D> {
 public:
  LayerNormNode(const D& d, Tensor x, Tensor w, Tensor mean, Tensor rstd)
      : NodeT<D>(d), x_(std::move(x)), w_(std::move(w)), mean_(std::move(mean)), rstd_(std::move(rstd)) {}
  std::string_view name() const override { return "layer_norm"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const auto& e = this->next;
    ops::LayerNormGrads g =
        ops::layer_norm_bwd(this->d_, x_, w_, mean_, rstd_, dy, e[0].valid(), e[1].valid(), e[2].valid());
    return {g.dx, g.dweight, g.dbias};
  }
  void release() override { x_ = w_ = mean_ = rstd_ = Tensor(); }

 private:
  Tensor x_, w_, mean_, rstd_;
};

template <class D>
class AttentionNode final : public NodeT<D> {
 public:
  AttentionNode(const D& d, Tensor q, Tensor k, Tensor v, Tensor y, Tensor lse, Tensor kv_len, bool causal,
                double scale)
      : NodeT<D>(d), q_(std::move(q)), k_(std::move(k)), v_(std::move(v)), y_(std::move(y)), lse_(std::move(lse)),
        kv_len_(std::move(kv_len)), causal_(causal), scale_(scale) {}
  std::string_view name() const override { return "scaled_dot_product_attention"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    ops::AttentionGrads g = ops::attention_bwd(this->d_, q_, k_, v_, y_, lse_, dy, causal_, scale_, kv_len_);
    return {g.dq, g.dk, g.dv};
  }
  void release() override { q_ = k_ = v_ = y_ = lse_ = kv_len_ = Tensor(); }

 private:
  Tensor q_, k_, v_, y_, lse_, kv_len_;
  bool causal_;
  double scale_;
};

}  // namespace

template <class D>
Tensor layer_norm(const D& d, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  ops::LayerNormResult r = ops::layer_norm(d, x, weight, bias, eps);
  record<LayerNormNode<D>>(d, {&x, &weight, &bias}, r.y, x.detach(), weight.defined() ? weight.detach() : Tensor(),
                           r.mean, r.rstd);
  return r.y;
}

template <class D>
Tensor scaled_dot_product_attention(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                    std::optional<double> scale, const Tensor& kv_len) {
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.defined() && q.dim() == 4 ? q.size(3) : 1));
  ops::AttentionResult r = ops::attention(d, q, k, v, is_causal, s, kv_len);
  record<AttentionNode<D>>(d, {&q, &k, &v}, r.y, q.detach(), k.detach(), v.detach(), r.y.detach(), r.lse, kv_len,
                           is_causal, s);
  return r.y;
}

#define STRATA_AUTOGRAD_INSTANTIATE(D)                                                                    \
  template Tensor layer_norm<D>(const D&, const Tensor&, const Tensor&, const Tensor&, double);          \
  template Tensor scaled_dot_product_attention<D>(const D&, const Tensor&, const Tensor&, const Tensor&, \
                                                  bool, std::optional<double>, const Tensor&);
STRATA_AUTOGRAD_INSTANTIATE_ALL()

}  // namespace strata::autograd
