// Backward formulas of relu, pooling, space_to_depth, add, scale, dropout, reshape.
#include "strata/autograd/node_base.h"
#include "strata/ops/tensor_ops.h"

namespace strata::autograd {
using detail::NodeT;
using detail::record;

namespace {

template <class D>
class ReluNode final : public NodeT<D> {
 public:
  ReluNode(const D& d, Tensor y) : NodeT<D>(d), y_(std::move(y)) {}
  std::string_view name() const override { return "relu"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::relu_bwd(this->d_, y_, dy)}; }
  void release() override { y_ = Tensor(); }

 private:
  Tensor y_;  // the output, detached (see Tensor::detach)
};

template <class D>
class MaxPoolNode final : public NodeT<D> {
 public:
  MaxPoolNode(const D& d, Tensor x, Tensor y, Pool2dParams p) : NodeT<D>(d), x_(std::move(x)), y_(std::move(y)), p_(p) {}
  std::string_view name() const override { return "max_pool2d"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::max_pool2d_bwd(this->d_, x_, y_, dy, p_)}; }
  void release() override { x_ = y_ = Tensor(); }

 private:
  Tensor x_, y_;
  Pool2dParams p_;
};

template <class D>
class AvgPoolNode final : public NodeT<D> {
 public:
  AvgPoolNode(const D& d, Tensor x, Pool2dParams p) : NodeT<D>(d), x_(std::move(x)), p_(p) {}
  std::string_view name() const override { return "avg_pool2d"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::avg_pool2d_bwd(this->d_, dy, x_, p_)}; }
  void release() override { x_ = Tensor(); }

 private:
  Tensor x_;
  Pool2dParams p_;
};

template <class D>
class SpaceToDepthNode final : public NodeT<D> {
 public:
  SpaceToDepthNode(const D& d, Tensor x, ops::SpaceToDepthParams p) : NodeT<D>(d), x_(std::move(x)), p_(p) {}
  std::string_view name() const override { return "space_to_depth"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::space_to_depth_bwd(this->d_, dy, x_, p_)}; }
  void release() override { x_ = Tensor(); }

 private:
  Tensor x_;  // for its sizes, layout and device
  ops::SpaceToDepthParams p_;
};

template <class D>
class GlobalAvgPoolNode final : public NodeT<D> {
 public:
  GlobalAvgPoolNode(const D& d, Tensor x) : NodeT<D>(d), x_(std::move(x)) {}
  std::string_view name() const override { return "global_avg_pool"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::global_avg_pool_bwd(this->d_, dy, x_)}; }
  void release() override { x_ = Tensor(); }

 private:
  Tensor x_;
};

template <class D>
class AddNode final : public NodeT<D> {
 public:
  explicit AddNode(const D& d) : NodeT<D>(d) {}
  std::string_view name() const override { return "add"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {dy, dy}; }
  void release() override {}
};

template <class D>
class ScaleNode final : public NodeT<D> {
 public:
  ScaleNode(const D& d, double alpha) : NodeT<D>(d), alpha_(alpha) {}
  std::string_view name() const override { return "scale"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::scale(this->d_, dy, alpha_)}; }
  void release() override {}

 private:
  double alpha_;
};

template <class D>
class DropoutNode final : public NodeT<D> {
 public:
  DropoutNode(const D& d, Tensor mask, double p) : NodeT<D>(d), mask_(std::move(mask)), p_(p) {}
  std::string_view name() const override { return "dropout"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::dropout_bwd(this->d_, dy, mask_, p_)}; }
  void release() override { mask_ = Tensor(); }

 private:
  Tensor mask_;
  double p_;
};

template <class D>
class ReshapeNode final : public NodeT<D> {
 public:
  ReshapeNode(const D& d, Shape in) : NodeT<D>(d), in_(in) {}
  std::string_view name() const override { return "reshape"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {dy.contiguous().view(in_)}; }
  void release() override {}

 private:
  Shape in_;
};

// Mixed precision: the gradient goes back in the dtype and layout of the input (an
// f32 master weight gets an f32 gradient from a bf16 use).
template <class D>
class CastNode final : public NodeT<D> {
 public:
  CastNode(const D& d, DType in, MemoryFormat fmt) : NodeT<D>(d), in_(in), fmt_(fmt) {}
  std::string_view name() const override { return "cast"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::to(this->d_, dy, in_, dy.device(), fmt_)}; }
  void release() override {}

 private:
  DType in_;
  MemoryFormat fmt_;
};

}  // namespace

template <class D>
Tensor cast(const D& d, const Tensor& x, DType dt) {
  return cast(d, x, dt, x.suggested_format());
}

template <class D>
Tensor cast(const D& d, const Tensor& x, DType dt, MemoryFormat fmt) {
  if (x.dtype() == dt && fmt == x.suggested_format()) return x;
  Tensor y = ops::to(d, x, dt, x.device(), x.dim() == 4 ? fmt : MemoryFormat::contiguous);
  record<CastNode<D>>(d, {&x}, y, x.dtype(), x.suggested_format());
  return y;
}

template <class D>
Tensor relu(const D& d, const Tensor& x) {
  Tensor y = ops::relu(d, x);
  record<ReluNode<D>>(d, {&x}, y, y.detach());
  return y;
}

template <class D>
Tensor max_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  Tensor y = ops::max_pool2d(d, x, p);
  record<MaxPoolNode<D>>(d, {&x}, y, x, y.detach(), p);
  return y;
}

template <class D>
Tensor avg_pool2d(const D& d, const Tensor& x, const Pool2dParams& p) {
  Tensor y = ops::avg_pool2d(d, x, p);
  record<AvgPoolNode<D>>(d, {&x}, y, x, p);
  return y;
}

template <class D>
Tensor global_avg_pool(const D& d, const Tensor& x) {
  Tensor y = ops::global_avg_pool(d, x);
  record<GlobalAvgPoolNode<D>>(d, {&x}, y, x);
  return y;
}

template <class D>
Tensor space_to_depth(const D& d, const Tensor& x, const ops::SpaceToDepthParams& p) {
  Tensor y = ops::space_to_depth(d, x, p);
  record<SpaceToDepthNode<D>>(d, {&x}, y, x, p);
  return y;
}

template <class D>
Tensor add(const D& d, const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined() && !(a.sizes() == b.sizes())) {  // broadcast, as autograd::binary
    const Shape out = ops::broadcast_shape("add", a.sizes(), b.sizes());
    return autograd::add(d, detail::broadcast_to(d, a, out), detail::broadcast_to(d, b, out));
  }
  Tensor y = ops::add(d, a, b);
  record<AddNode<D>>(d, {&a, &b}, y);
  return y;
}

template <class D>
Tensor scale(const D& d, const Tensor& x, double alpha) {
  Tensor y = ops::scale(d, x, alpha);
  record<ScaleNode<D>>(d, {&x}, y, alpha);
  return y;
}

template <class D>
Tensor dropout(const D& d, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  if (p == 0.0) return x;
  ops::DropoutOut o = ops::dropout(d, x, p, seed, offset);
  record<DropoutNode<D>>(d, {&x}, o.y, o.mask, p);
  return o.y;
}

template <class D>
Tensor reshape(const D& d, const Tensor& x, const Shape& sizes) {
  Shape resolved = sizes;  // one -1 takes the remaining count
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != -1) {
      STRATA_CHECK(sizes[i] >= 0, "reshape: negative size in ", sizes.str());
      known *= sizes[i];
      continue;
    }
    STRATA_CHECK(infer < 0, "reshape: more than one -1 in ", sizes.str());
    infer = i;
  }
  if (infer >= 0) {
    STRATA_CHECK(known > 0 && x.numel() % known == 0, "reshape: cannot reshape ", x.str(), " to ", sizes.str());
    resolved[infer] = x.numel() / known;
  }
  STRATA_CHECK(resolved.numel() == x.numel(), "reshape: cannot reshape ", x.str(), " to ", sizes.str(),
               " (element counts differ)");
  Tensor y = ops::view_or_copy(x, resolved);
  record<ReshapeNode<D>>(d, {&x}, y, x.sizes());  // y is a new handle, never x itself
  return y;
}

#define STRATA_AUTOGRAD_INSTANTIATE(D)                                               \
  template Tensor relu<D>(const D&, const Tensor&);                                 \
  template Tensor max_pool2d<D>(const D&, const Tensor&, const Pool2dParams&);      \
  template Tensor avg_pool2d<D>(const D&, const Tensor&, const Pool2dParams&);      \
  template Tensor global_avg_pool<D>(const D&, const Tensor&);                      \
  template Tensor space_to_depth<D>(const D&, const Tensor&, const ops::SpaceToDepthParams&); \
  template Tensor add<D>(const D&, const Tensor&, const Tensor&);                   \
  template Tensor scale<D>(const D&, const Tensor&, double);                        \
  template Tensor dropout<D>(const D&, const Tensor&, double, uint64_t, uint64_t);  \
  template Tensor reshape<D>(const D&, const Tensor&, const Shape&);                \
  template Tensor cast<D>(const D&, const Tensor&, DType);                           \
  template Tensor cast<D>(const D&, const Tensor&, DType, MemoryFormat);
STRATA_AUTOGRAD_INSTANTIATE_ALL()

}  // namespace strata::autograd
