// Backward of the formulas of ops/table/pointwise.def: the row's derivative, run by
// unary_bwd / binary_bwd on the saved operands.
#include "strata/autograd/node_base.h"

namespace strata::autograd {
using detail::NodeT;
using detail::record;

namespace {

template <class D>
class UnaryNode final : public NodeT<D> {
 public:
  UnaryNode(const D& d, ops::UnaryFn fn, Tensor x, Tensor y, double p0, double p1)
      : NodeT<D>(d), fn_(fn), x_(std::move(x)), y_(std::move(y)), p0_(p0), p1_(p1) {}
  std::string_view name() const override { return ops::unary_name(fn_); }
  std::vector<Tensor> apply(const Tensor& dy) override {
    return {ops::unary_bwd(this->d_, fn_, x_, y_, dy, p0_, p1_)};
  }
  void release() override { x_ = y_ = Tensor(); }

 private:
  ops::UnaryFn fn_;
  Tensor x_, y_;  // y detached (see Tensor::detach)
  double p0_, p1_;
};

template <class D>
class BinaryNode final : public NodeT<D> {
 public:
  BinaryNode(const D& d, ops::BinaryFn fn, Tensor a, Tensor b, Tensor y, bool want_da, bool want_db)
      : NodeT<D>(d), fn_(fn), a_(std::move(a)), b_(std::move(b)), y_(std::move(y)), want_da_(want_da),
        want_db_(want_db) {}
  std::string_view name() const override { return ops::binary_name(fn_); }
  std::vector<Tensor> apply(const Tensor& dy) override {
    ops::BinaryGrads g = ops::binary_bwd(this->d_, fn_, a_, b_, y_, dy, want_da_, want_db_);
    return {g.da, g.db};
  }
  void release() override { a_ = b_ = y_ = Tensor(); }

 private:
  ops::BinaryFn fn_;
  Tensor a_, b_, y_;
  bool want_da_, want_db_;  // only the gradients an input needs
};

}  // namespace

template <class D>
Tensor unary(const D& d, ops::UnaryFn fn, const Tensor& x, double p0, double p1) {
  Tensor y = ops::unary(d, fn, x, p0, p1);
  record<UnaryNode<D>>(d, {&x}, y, fn, x.detach(), y.detach(), p0, p1);
  return y;
}

// Operands of other shapes are broadcast first by autograd::expand, whose backward sums the
// gradient over the repeated dims; the formula's backward then sees one shape.
template <class D>
Tensor binary(const D& d, ops::BinaryFn fn, const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined() && !(a.sizes() == b.sizes())) {
    const Shape out = ops::broadcast_shape(ops::binary_name(fn), a.sizes(), b.sizes());
    return autograd::binary(d, fn, detail::broadcast_to(d, a, out), detail::broadcast_to(d, b, out));
  }
  Tensor y = ops::binary(d, fn, a, b);
  record<BinaryNode<D>>(d, {&a, &b}, y, fn, a.detach(), b.detach(), y.detach(), a.requires_grad(),
                        b.requires_grad());
  return y;
}

#define STRATA_AUTOGRAD_INSTANTIATE(D)                                                   \
  template Tensor unary<D>(const D&, ops::UnaryFn, const Tensor&, double, double); \
  template Tensor binary<D>(const D&, ops::BinaryFn, const Tensor&, const Tensor&);
STRATA_AUTOGRAD_INSTANTIATE_ALL()

}  // namespace strata::autograd
