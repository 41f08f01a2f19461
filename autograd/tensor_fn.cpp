// Backward formulas of the tensor API: expand (sum over the repeated dims), permute, slice,
// reductions, softmax, bmm, where, index_select, cat; matmul and var composed of them.
#include <algorithm>
#include <limits>
#include <numeric>

#include "strata/autograd/node_base.h"
#include "strata/ops/validate_tensor.h"

namespace strata::autograd {
using detail::NodeT;
using detail::record;

namespace {

// A dense copy of a view through the dispatcher (a gradient handed on is never a stride-0 or
// strided view of another tensor's memory).
template <class D>
Tensor materialize(const D& d, const Tensor& t) {
  Tensor o = Tensor::empty(t.sizes(), t.dtype(), t.device());
  ops::copy_(d, t, o);
  return o;
}

// A rank-0 tensor of `value` in x's dtype on x's device.
template <class D>
Tensor scalar_like(const D& d, const Tensor& x, double value) {
  return ops::full(d, Shape{}, x.dtype(), value);
}

template <class D>
class ExpandNode final : public NodeT<D> {
 public:
  ExpandNode(const D& d, Shape in) : NodeT<D>(d), in_(in) {}
  std::string_view name() const override { return "expand"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    std::vector<int> dims;
    const int lead = dy.dim() - in_.size();
    for (int i = 0; i < dy.dim(); ++i)
      if (i < lead || (in_[i - lead] == 1 && dy.size(i) != 1)) dims.push_back(i);
    if (dims.empty()) return {dy.contiguous().view(in_)};
    return {ops::reduce(this->d_, ops::ReduceFn::sum, dy, dims, true).view(in_)};
  }
  void release() override {}

 private:
  Shape in_;
};

template <class D>
class PermuteNode final : public NodeT<D> {
 public:
  PermuteNode(const D& d, std::vector<int> inverse) : NodeT<D>(d), inverse_(std::move(inverse)) {}
  std::string_view name() const override { return "permute"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {materialize(this->d_, dy.permute(inverse_))}; }
  void release() override {}

 private:
  std::vector<int> inverse_;
};

template <class D>
class SliceNode final : public NodeT<D> {
 public:
  SliceNode(const D& d, Shape in, DType dt, int dim, int64_t start, int64_t step)
      : NodeT<D>(d), in_(in), dt_(dt), dim_(dim), start_(start), step_(step) {}
  std::string_view name() const override { return "slice"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = ops::full(this->d_, in_, dt_, 0.0);
    Shape st = dx.strides();
    st[dim_] *= step_;
    ops::copy_(this->d_, dy, dx.as_strided(dy.sizes(), st, dx.offset() + start_ * dx.strides()[dim_]));
    return {dx};
  }
  void release() override {}

 private:
  Shape in_;
  DType dt_;
  int dim_;
  int64_t start_, step_;
};

// sum, mean: the gradient spread over the reduced dims; amax/amin: to the extreme elements,
// split evenly among ties (PyTorch's amax/amin).
template <class D>
class ReduceNode final : public NodeT<D> {
 public:
  // dims: the reduced dims of an input of x_sizes (the output kept them with size 1: keep_).
  ReduceNode(const D& d, ops::ReduceFn fn, Tensor x, Tensor y_keep, std::vector<int> dims, Shape x_sizes)
      : NodeT<D>(d), fn_(fn), x_(std::move(x)), y_(std::move(y_keep)), dims_(std::move(dims)), x_sizes_(x_sizes),
        keep_(x_sizes) {
    for (int i : dims_) keep_[i] = 1;
  }
  std::string_view name() const override { return ops::reduce_name(fn_); }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const D& d = this->d_;
    Tensor g = dy.contiguous().view(keep_);
    if (fn_ == ops::ReduceFn::sum || fn_ == ops::ReduceFn::mean) {
      if (fn_ == ops::ReduceFn::mean) {
        const int64_t n = keep_.numel() > 0 ? x_sizes_.numel() / keep_.numel() : 0;
        g = ops::scale(d, g, n > 0 ? 1.0 / static_cast<double>(n) : 0.0);
      }
      return {materialize(d, ops::expand_to("sum", g, x_sizes_))};
    }
    const Tensor hit = ops::eq(d, x_, y_);  // u8 at the extreme elements
    const Tensor zero = scalar_like(d, x_, 0.0), one = scalar_like(d, x_, 1.0);
    const Tensor ties = ops::reduce(d, ops::ReduceFn::sum, ops::where(d, hit, one, zero), dims_, true);
    return {ops::where(d, hit, ops::div(d, g, ties), zero)};
  }
  void release() override { x_ = y_ = Tensor(); }

 private:
  ops::ReduceFn fn_;
  Tensor x_, y_;  // amax/amin only
  std::vector<int> dims_;
  Shape x_sizes_, keep_;
};

template <class D>
class SoftmaxNode final : public NodeT<D> {
 public:
  SoftmaxNode(const D& d, Tensor y, int dim, bool log) : NodeT<D>(d), y_(std::move(y)), dim_(dim), log_(log) {}
  std::string_view name() const override { return log_ ? "log_softmax" : "softmax"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::softmax_bwd(this->d_, y_, dy, dim_, log_)}; }
  void release() override { y_ = Tensor(); }

 private:
  Tensor y_;
  int dim_;
  bool log_;
};

// y = a b: da = dy b^T, db = a^T dy (transposes as strides, which the GEMMs read).
template <class D>
class BmmNode final : public NodeT<D> {
 public:
  BmmNode(const D& d, Tensor a, Tensor b, bool want_a, bool want_b)
      : NodeT<D>(d), a_(std::move(a)), b_(std::move(b)), want_a_(want_a), want_b_(want_b) {}
  std::string_view name() const override { return "bmm"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor da, db;
    if (want_a_) da = ops::bmm(this->d_, dy, b_.permute({0, 2, 1}));
    if (want_b_) db = ops::bmm(this->d_, a_.permute({0, 2, 1}), dy);
    return {da, db};
  }
  void release() override { a_ = b_ = Tensor(); }

 private:
  Tensor a_, b_;
  bool want_a_, want_b_;
};

template <class D>
class WhereNode final : public NodeT<D> {
 public:
  WhereNode(const D& d, Tensor cond) : NodeT<D>(d), cond_(std::move(cond)) {}
  std::string_view name() const override { return "where"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const Tensor zero = scalar_like(this->d_, dy, 0.0);
    return {Tensor(), ops::where(this->d_, cond_, dy, zero), ops::where(this->d_, cond_, zero, dy)};
  }
  void release() override { cond_ = Tensor(); }

 private:
  Tensor cond_;
};

template <class D>
class IndexSelectNode final : public NodeT<D> {
 public:
  IndexSelectNode(const D& d, Shape in, int dim, Tensor index)
      : NodeT<D>(d), in_(in), dim_(dim), index_(std::move(index)) {}
  std::string_view name() const override { return "index_select"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    return {ops::index_add(this->d_, dy, dim_, index_, in_)};
  }
  void release() override { index_ = Tensor(); }

 private:
  Shape in_;
  int dim_;
  Tensor index_;
};

template <class D>
class CatNode final : public NodeT<D> {
 public:
  CatNode(const D& d, int dim, std::vector<int64_t> lengths) : NodeT<D>(d), dim_(dim), lengths_(std::move(lengths)) {}
  std::string_view name() const override { return "cat"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    std::vector<Tensor> out;
    int64_t at = 0;
    for (int64_t len : lengths_) {
      out.push_back(materialize(this->d_, dy.narrow(dim_, at, len)));
      at += len;
    }
    return out;
  }
  void release() override {}

 private:
  int dim_;
  std::vector<int64_t> lengths_;
};

}  // namespace

template <class D>
Tensor expand(const D& d, const Tensor& x, const Shape& sizes) {
  Shape want = sizes;
  const int lead = sizes.size() - x.dim();
  for (int i = 0; i < sizes.size(); ++i)
    if (sizes[i] == -1) {
      STRATA_CHECK(i >= lead, "expand: -1 given for new leading dim ", i, " of ", sizes.str());
      want[i] = x.size(i - lead);
    }
  Tensor y = ops::expand_to("expand", x, want);
  if (y.same(x)) y = x.detach();  // a new handle: the tape's output is never x itself
  record<ExpandNode<D>>(d, {&x}, y, x.sizes());
  return y;
}

template <class D>
Tensor permute(const D& d, const Tensor& x, std::span<const int> dims) {
  STRATA_CHECK(static_cast<int>(dims.size()) == x.dim(), "permute: ", dims.size(), " dims given for ", x.str());
  std::vector<int> p(dims.size()), inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) p[i] = ops::wrap_dim("permute", dims[i], x.dim());
  for (size_t i = 0; i < dims.size(); ++i) inverse[p[i]] = static_cast<int>(i);
  Tensor y = x.permute(p);  // checks it is a permutation
  record<PermuteNode<D>>(d, {&x}, y, std::move(inverse));
  return y;
}

template <class D>
Tensor transpose(const D& d, const Tensor& x, int dim0, int dim1) {
  if (x.dim() == 0) return autograd::permute(d, x, std::span<const int>());
  std::vector<int> p(x.dim());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[ops::wrap_dim("transpose", dim0, x.dim())], p[ops::wrap_dim("transpose", dim1, x.dim())]);
  return autograd::permute(d, x, p);
}

template <class D>
Tensor slice(const D& d, const Tensor& x, int dim, int64_t start, int64_t end, int64_t step) {
  STRATA_CHECK(x.dim() >= 1, "slice: ", x.str(), " has no dims to slice");
  const int w = ops::wrap_dim("slice", dim, x.dim());
  STRATA_CHECK(step >= 1, "slice: step must be positive, got ", step);
  const int64_t n = x.size(w);
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  const int64_t s = clampi(start), e = std::max(clampi(end), s);
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[w] = (e - s + step - 1) / step;
  strides[w] *= step;
  Tensor y = x.as_strided(sizes, strides, x.offset() + s * x.strides()[w]);
  record<SliceNode<D>>(d, {&x}, y, x.sizes(), x.dtype(), w, s, step);
  return y;
}

template <class D>
Tensor reduce(const D& d, ops::ReduceFn fn, const Tensor& x, std::span<const int> dims, bool keepdim) {
  Tensor y = ops::reduce(d, fn, x, dims, keepdim);
  if (fn == ops::ReduceFn::argmax || fn == ops::ReduceFn::argmin || !any_requires_grad({&x})) return y;
  const std::vector<bool> mask = ops::reduce_mask(ops::reduce_name(fn), dims, x.dim());
  std::vector<int> all;
  for (int i = 0; i < x.dim(); ++i)
    if (mask[i]) all.push_back(i);
  const bool extreme = fn == ops::ReduceFn::max || fn == ops::ReduceFn::min;
  const Shape keep = ops::reduced_shape(x.sizes(), mask, true);
  record<ReduceNode<D>>(d, {&x}, y, fn, extreme ? x.detach() : Tensor(),
                        extreme ? y.detach().contiguous().view(keep) : Tensor(), std::move(all), x.sizes());
  return y;
}

template <class D>
Tensor softmax(const D& d, const Tensor& x, int dim, bool log) {
  Tensor y = ops::softmax(d, x, dim, log);
  record<SoftmaxNode<D>>(d, {&x}, y, y.detach(), dim, log);
  return y;
}

template <class D>
Tensor bmm(const D& d, const Tensor& a, const Tensor& b) {
  ops::validate_bmm(d, a, b);
  const int64_t batch = std::max(a.size(0), b.size(0));
  // A broadcast batch is an expand, whose backward sums the batch's gradients.
  const Tensor ea = detail::broadcast_to(d, a, {batch, a.size(1), a.size(2)});
  const Tensor eb = detail::broadcast_to(d, b, {batch, b.size(1), b.size(2)});
  Tensor y = ops::bmm(d, ea, eb);
  record<BmmNode<D>>(d, {&ea, &eb}, y, ea.detach(), eb.detach(), ea.requires_grad(), eb.requires_grad());
  return y;
}

template <class D>
Tensor matmul(const D& d, const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.defined() && b.defined(), "matmul: argument '", a.defined() ? "b" : "a", "' is an undefined tensor");
  STRATA_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least one dim, got ", a.str(), " and ",
               b.str());
  const int64_t k = a.size(a.dim() - 1), kb = b.dim() == 1 ? b.size(0) : b.size(b.dim() - 2);
  STRATA_CHECK(k == kb, "matmul: ", a.sizes().str(), " and ", b.sizes().str(), " cannot be multiplied (", k,
               " columns vs ", kb, " rows)");
  const Tensor a2 = a.dim() == 1 ? autograd::reshape(d, a, {1, k}) : a;
  const Tensor b2 = b.dim() == 1 ? autograd::reshape(d, b, {k, 1}) : b;
  const int64_t m = a2.size(a2.dim() - 2), n = b2.size(b2.dim() - 1);
  Shape batch_a, batch_b;
  for (int i = 0; i < a2.dim() - 2; ++i) batch_a.push_back(a2.size(i));
  for (int i = 0; i < b2.dim() - 2; ++i) batch_b.push_back(b2.size(i));
  const Shape batch = ops::broadcast_shape("matmul", batch_a, batch_b);
  Tensor y;
  if (b2.dim() == 2) {  // fold a's batch into its rows: one GEMM, as for a linear layer
    const Tensor rows = autograd::reshape(d, a2, {1, batch.numel() * m, k});
    y = autograd::bmm(d, rows, autograd::reshape(d, b2, {1, k, n}));
  } else {
    Shape sa = batch, sb = batch;
    sa.push_back(m), sa.push_back(k);
    sb.push_back(k), sb.push_back(n);
    const Tensor ra = autograd::reshape(d, autograd::expand(d, a2, sa), {batch.numel(), m, k});
    const Tensor rb = autograd::reshape(d, autograd::expand(d, b2, sb), {batch.numel(), k, n});
    y = autograd::bmm(d, ra, rb);
  }
  Shape out = batch;
  if (a.dim() > 1) out.push_back(m);
  if (b.dim() > 1) out.push_back(n);
  return autograd::reshape(d, y, out);
}

template <class D>
Tensor where(const D& d, const Tensor& cond, const Tensor& a, const Tensor& b) {
  STRATA_CHECK(cond.defined() && a.defined() && b.defined(), "where: an argument is an undefined tensor");
  const Shape out = ops::broadcast_shape("where", ops::broadcast_shape("where", cond.sizes(), a.sizes()), b.sizes());
  const Tensor ea = detail::broadcast_to(d, a, out), eb = detail::broadcast_to(d, b, out);
  Tensor y = ops::where(d, cond, ea, eb);
  record<WhereNode<D>>(d, {&cond, &ea, &eb}, y, ops::expand_to("where", cond, out));
  return y;
}

template <class D>
Tensor index_select(const D& d, const Tensor& x, int dim, const Tensor& index) {
  Tensor y = ops::index_select(d, x, dim, index);
  record<IndexSelectNode<D>>(d, {&x}, y, x.sizes(), ops::wrap_dim("index_select", dim, x.dim()), index);
  return y;
}

template <class D>
Tensor cat(const D& d, std::span<const Tensor> xs, int dim) {
  STRATA_CHECK(!xs.empty(), "cat: no tensors given");
  const Tensor& first = xs[0];
  STRATA_CHECK(first.defined() && first.dim() >= 1, "cat: tensor 0 must have at least one dim");
  const int w = ops::wrap_dim("cat", dim, first.dim());
  Shape out = first.sizes();
  out[w] = 0;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    STRATA_CHECK(x.defined(), "cat: tensor ", i, " is undefined");
    STRATA_CHECK(x.dim() == first.dim() && x.dtype() == first.dtype() && x.device() == first.device(), "cat: tensor ",
                 i, " ", x.str(), " does not match tensor 0 ", first.str(), " in rank, dtype or device");
    for (int j = 0; j < x.dim(); ++j)
      STRATA_CHECK(j == w || x.size(j) == first.size(j), "cat: tensor ", i, " ", x.sizes().str(), " differs from tensor 0 ",
                   first.sizes().str(), " in dim ", j, " (only dim ", w, " may differ)");
    out[w] += x.size(w);
    lengths.push_back(x.size(w));
  }
  Tensor y = Tensor::empty(out, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& x : xs) {
    if (x.size(w) > 0) ops::copy_(d, x, y.narrow(w, at, x.size(w)));
    at += x.size(w);
  }
  if (any_requires_grad(xs)) attach(std::make_shared<CatNode<D>>(d, w, std::move(lengths)), xs, y);
  return y;
}

template <class D>
Tensor var(const D& d, const Tensor& x, std::span<const int> dims, bool unbiased, bool keepdim) {
  const std::vector<bool> mask = ops::reduce_mask("var", dims, x.dim());
  int64_t n = 1;
  for (int i = 0; i < x.dim(); ++i)
    if (mask[i]) n *= x.size(i);
  const Tensor centred = autograd::sub(d, x, autograd::reduce(d, ops::ReduceFn::mean, x, dims, true));
  const Tensor ss = autograd::reduce(d, ops::ReduceFn::sum, autograd::mul(d, centred, centred), dims, keepdim);
  const int64_t denom = unbiased ? n - 1 : n;
  const double inv = denom > 0 ? 1.0 / static_cast<double>(denom) : std::numeric_limits<double>::quiet_NaN();
  return autograd::scale(d, ss, inv);
}

#define STRATA_AUTOGRAD_INSTANTIATE(D)                                                               \
  template Tensor expand<D>(const D&, const Tensor&, const Shape&);                                  \
  template Tensor permute<D>(const D&, const Tensor&, std::span<const int>);                         \
  template Tensor transpose<D>(const D&, const Tensor&, int, int);                                   \
  template Tensor slice<D>(const D&, const Tensor&, int, int64_t, int64_t, int64_t);                 \
  template Tensor reduce<D>(const D&, ops::ReduceFn, const Tensor&, std::span<const int>, bool);     \
  template Tensor softmax<D>(const D&, const Tensor&, int, bool);                                    \
  template Tensor bmm<D>(const D&, const Tensor&, const Tensor&);                                    \
  template Tensor matmul<D>(const D&, const Tensor&, const Tensor&);                                 \
  template Tensor where<D>(const D&, const Tensor&, const Tensor&, const Tensor&);                   \
  template Tensor index_select<D>(const D&, const Tensor&, int, const Tensor&);                      \
  template Tensor cat<D>(const D&, std::span<const Tensor>, int);                                    \
  template Tensor var<D>(const D&, const Tensor&, std::span<const int>, bool, bool);
STRATA_AUTOGRAD_INSTANTIATE_ALL()

}  // namespace strata::autograd
