// The tensor API's methods and operators (declared in core/tensor.h): each one call of the
// recorded functions (autograd/functions.h) on the default dispatcher of its operand's device.
#include <array>
#include <mutex>
#include <optional>

#include "strata/autograd/default_dispatch.h"
#include "strata/autograd/functions.h"
#include "strata/autograd/indexing.h"
#include "strata/autograd/node.h"
#include "strata/autograd/node_base.h"
#include "strata/core/factories.h"

namespace strata {

namespace autograd {
namespace {
bool runs_every_op(const backends::Backend& b, DType dt) {
  for (int i = 0; i < ops::kNumOps; ++i)
    if (!b.capabilities().supports(static_cast<ops::OpId>(i), dt)) return false;
  return true;
}
backends::Backend& choose(DeviceType t, DType dt) {
  auto& reg = backends::registry();
  backends::Backend& best = reg.get(reg.best(t));
  if (runs_every_op(best, dt)) return best;
  backends::Backend* fallback = nullptr;
  for (backends::Backend* b : reg.for_device(t)) {
    if (b->name() == "null" || !runs_every_op(*b, dt)) continue;
    if (b->name() != "reference") return *b;
    fallback = b;
  }
  return fallback ? *fallback : best;
}
}  // namespace

const ops::VirtualDispatch& default_dispatch(Device device, DType dtype) {
  constexpr int kDTypes = 8;
  static std::array<std::array<std::optional<ops::VirtualDispatch>, kDTypes>, 2> chosen;
  static std::array<std::array<std::once_flag, kDTypes>, 2> once;
  const int i = device.type == DeviceType::cpu ? 0 : 1, j = static_cast<int>(dtype) % kDTypes;
  std::call_once(once[i][j], [&] { chosen[i][j].emplace(choose(device.type, dtype)); });
  return *chosen[i][j];
}

const ops::VirtualDispatch& default_dispatch(const Tensor& t, std::string_view who) {
  STRATA_CHECK(t.defined(), who, ": use of an undefined tensor");
  return default_dispatch(t.device(), t.dtype());
}
}  // namespace autograd

namespace {
using autograd::default_dispatch;
const ops::VirtualDispatch& dd(const Tensor& t) { return default_dispatch(t, "tensor API"); }
// The rank-0 tensor of a scalar operand: the other operand's dtype and device.
Tensor scalar(const Tensor& like, double v) { return full(Shape{}, v, like.dtype(), like.device()); }
std::vector<int> dims_of(const Dims& d) { return d.list(); }
}  // namespace

Tensor Tensor::reshape(const Shape& sizes) const { return autograd::reshape(dd(*this), *this, sizes); }
Tensor Tensor::flatten(int start_dim, int end_dim) const {
  if (dim() == 0) return reshape({1});
  const int s = ops::wrap_dim("flatten", start_dim, dim()), e = ops::wrap_dim("flatten", end_dim, dim());
  STRATA_CHECK(s <= e, "flatten: start_dim ", s, " is after end_dim ", e);
  Shape out;
  int64_t merged = 1;
  for (int i = 0; i < dim(); ++i) {
    if (i < s || i > e) {
      out.push_back(size(i));
      continue;
    }
    merged *= size(i);
    if (i == e) out.push_back(merged);
  }
  return reshape(out);
}
Tensor Tensor::transpose(int dim0, int dim1) const { return autograd::transpose(dd(*this), *this, dim0, dim1); }
Tensor Tensor::t() const {
  STRATA_CHECK(dim() <= 2, "t: expects a tensor of rank <= 2, got ", str(), " (use transpose(dim0, dim1))");
  return dim() < 2 ? autograd::reshape(dd(*this), *this, sizes()) : transpose(0, 1);
}
Tensor Tensor::permuted(const std::vector<int>& dims) const { return autograd::permute(dd(*this), *this, dims); }
Tensor Tensor::unsqueeze(int d) const {
  const int w = ops::wrap_dim("unsqueeze", d, dim() + 1);
  Shape out;
  for (int i = 0; i <= dim(); ++i) {
    if (i == w) out.push_back(1);
    if (i < dim()) out.push_back(size(i));
  }
  return reshape(out);
}
Tensor Tensor::squeeze(int d) const {
  const int w = ops::wrap_dim("squeeze", d, dim());
  if (dim() == 0 || size(w) != 1) return reshape(sizes());
  Shape out;
  for (int i = 0; i < dim(); ++i)
    if (i != w) out.push_back(size(i));
  return reshape(out);
}
Tensor Tensor::squeeze() const {
  Shape out;
  for (int i = 0; i < dim(); ++i)
    if (size(i) != 1) out.push_back(size(i));
  return reshape(out);
}
Tensor Tensor::expand(const Shape& s) const { return autograd::expand(dd(*this), *this, s); }
Tensor Tensor::slice(int d, int64_t start, int64_t end, int64_t step) const {
  return autograd::slice(dd(*this), *this, d, start, end, step);
}
Tensor Tensor::select(int d, int64_t index) const {
  STRATA_CHECK(dim() >= 1, "select: ", str(), " has no dims");
  const int w = ops::wrap_dim("select", d, dim());
  const int64_t n = size(w), i = index < 0 ? index + n : index;
  STRATA_CHECK(i >= 0 && i < n, "select: index ", index, " is out of range for dim ", w, " of size ", n);
  return slice(w, i, i + 1).squeeze(w);
}
Tensor Tensor::index_select(int d, const Tensor& index) const {
  return autograd::index_select(dd(*this), *this, d, index);
}
Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  return autograd::where(dd(*this), mask, scalar(*this, value), *this);
}
Tensor Tensor::matmul(const Tensor& o) const { return autograd::matmul(dd(*this), *this, o); }
Tensor Tensor::mm(const Tensor& o) const {
  STRATA_CHECK(dim() == 2 && o.defined() && o.dim() == 2, "mm: expects two 2-D tensors, got ", str(), " and ",
               o.defined() ? o.str() : "an undefined tensor");
  return matmul(o);
}
Tensor Tensor::bmm(const Tensor& o) const {
  STRATA_CHECK(dim() == 3 && o.defined() && o.dim() == 3 && size(0) == o.size(0), "bmm: expects two 3-D tensors of ",
               "one batch size, got ", str(), " and ", o.defined() ? o.str() : "an undefined tensor");
  return autograd::bmm(dd(*this), *this, o);
}
// Over every dim to a rank-0 tensor: the table's sum and mean rows (the losses' reductions).
Tensor Tensor::sum(Dims d, bool keepdim) const {
  if (d.all() && !keepdim && dim() > 0) return autograd::sum(dd(*this), *this);
  return autograd::reduce(dd(*this), ops::ReduceFn::sum, *this, dims_of(d), keepdim);
}
Tensor Tensor::mean(Dims d, bool keepdim) const {
  if (d.all() && !keepdim && dim() > 0 && numel() > 0) return autograd::mean(dd(*this), *this);
  return autograd::reduce(dd(*this), ops::ReduceFn::mean, *this, dims_of(d), keepdim);
}
Tensor Tensor::amax(Dims d, bool keepdim) const {
  return autograd::reduce(dd(*this), ops::ReduceFn::max, *this, dims_of(d), keepdim);
}
Tensor Tensor::amin(Dims d, bool keepdim) const {
  return autograd::reduce(dd(*this), ops::ReduceFn::min, *this, dims_of(d), keepdim);
}
Tensor Tensor::var(Dims d, bool unbiased, bool keepdim) const {
  return autograd::var(dd(*this), *this, dims_of(d), unbiased, keepdim);
}
// Along the last dim of a matrix: the table's argmax row (classification's), else reduce_dims.
Tensor Tensor::argmax(int d, bool keepdim) const {
  if (dim() == 2 && !keepdim && size(1) > 0 && ops::wrap_dim("argmax", d, 2) == 1) return ops::argmax(dd(*this), *this);
  const int one[] = {d};
  return ops::reduce(dd(*this), ops::ReduceFn::argmax, *this, one, keepdim);
}
Tensor Tensor::argmax() const { return ops::reduce(dd(*this), ops::ReduceFn::argmax, *this, {}, false); }
Tensor Tensor::argmin(int d, bool keepdim) const {
  const int one[] = {d};
  return ops::reduce(dd(*this), ops::ReduceFn::argmin, *this, one, keepdim);
}
Tensor Tensor::argmin() const { return ops::reduce(dd(*this), ops::ReduceFn::argmin, *this, {}, false); }
Tensor Tensor::softmax(int d) const { return autograd::softmax(dd(*this), *this, d, false); }
Tensor Tensor::log_softmax(int d) const { return autograd::softmax(dd(*this), *this, d, true); }
Tensor Tensor::exp() const { return autograd::exp(dd(*this), *this); }
Tensor Tensor::log() const { return autograd::log(dd(*this), *this); }
Tensor Tensor::sqrt() const { return autograd::sqrt(dd(*this), *this); }
Tensor Tensor::rsqrt() const { return autograd::rsqrt(dd(*this), *this); }
Tensor Tensor::sigmoid() const { return autograd::sigmoid(dd(*this), *this); }
Tensor Tensor::tanh() const { return autograd::tanh(dd(*this), *this); }
Tensor Tensor::abs() const { return autograd::abs(dd(*this), *this); }
Tensor Tensor::relu() const { return autograd::relu(dd(*this), *this); }
Tensor Tensor::gelu(bool tanh_approximation) const {
  return tanh_approximation ? autograd::gelu_tanh(dd(*this), *this) : autograd::gelu(dd(*this), *this);
}
Tensor Tensor::pow(double e) const { return autograd::pow_scalar(dd(*this), *this, e); }
Tensor Tensor::pow(const Tensor& e) const { return autograd::pow(dd(*this), *this, e); }
Tensor Tensor::clamp(double lo, double hi) const { return autograd::clamp(dd(*this), *this, lo, hi); }
Tensor Tensor::maximum(const Tensor& o) const { return autograd::maximum(dd(*this), *this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return autograd::minimum(dd(*this), *this, o); }
Tensor Tensor::eq(const Tensor& o) const { return ops::eq(dd(*this), *this, o); }
Tensor Tensor::ne(const Tensor& o) const { return ops::ne(dd(*this), *this, o); }
Tensor Tensor::lt(const Tensor& o) const { return ops::lt(dd(*this), *this, o); }
Tensor Tensor::le(const Tensor& o) const { return ops::le(dd(*this), *this, o); }
Tensor Tensor::gt(const Tensor& o) const { return ops::gt(dd(*this), *this, o); }
Tensor Tensor::ge(const Tensor& o) const { return ops::ge(dd(*this), *this, o); }
Tensor Tensor::to(DType dt) const { return autograd::cast(dd(*this), *this, dt); }
Tensor Tensor::to(Device d) const {
  if (device() == d) return *this;
  // The copy runs on the GPU side's backend, which moves data both ways.
  const ops::VirtualDispatch& disp = default_dispatch(d.type == DeviceType::cpu ? device() : d, dtype());
  return ops::to(disp, *this, dtype(), d, MemoryFormat::contiguous);
}
Tensor Tensor::to(MemoryFormat fmt) const { return autograd::cast(dd(*this), *this, dtype(), fmt); }
void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward(*this, grad, {}, retain_graph);
}

Tensor operator-(const Tensor& x) { return autograd::neg(dd(x), x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return autograd::add(dd(a), a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return autograd::sub(dd(a), a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return autograd::mul(dd(a), a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return autograd::div(dd(a), a, b); }
Tensor operator+(const Tensor& a, double b) { return a + scalar(a, b); }
Tensor operator-(const Tensor& a, double b) { return a - scalar(a, b); }
Tensor operator*(const Tensor& a, double b) { return autograd::scale(dd(a), a, b); }
Tensor operator/(const Tensor& a, double b) { return a / scalar(a, b); }
Tensor operator+(double a, const Tensor& b) { return scalar(b, a) + b; }
Tensor operator-(double a, const Tensor& b) { return scalar(b, a) - b; }
Tensor operator*(double a, const Tensor& b) { return autograd::scale(dd(b), b, a); }
Tensor operator/(double a, const Tensor& b) { return scalar(b, a) / b; }
Tensor operator==(const Tensor& a, const Tensor& b) { return a.eq(b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return a.ne(b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }
Tensor operator==(const Tensor& a, double b) { return a.eq(scalar(a, b)); }
Tensor operator!=(const Tensor& a, double b) { return a.ne(scalar(a, b)); }
Tensor operator<(const Tensor& a, double b) { return a.lt(scalar(a, b)); }
Tensor operator<=(const Tensor& a, double b) { return a.le(scalar(a, b)); }
Tensor operator>(const Tensor& a, double b) { return a.gt(scalar(a, b)); }
Tensor operator>=(const Tensor& a, double b) { return a.ge(scalar(a, b)); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a = a + b; }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a = a - b; }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a = a * b; }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a = a / b; }

Tensor matmul(const Tensor& a, const Tensor& b) { return a.matmul(b); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return autograd::where(dd(a), cond, a, b); }
Tensor cat(const std::vector<Tensor>& xs, int dim) {
  STRATA_CHECK(!xs.empty(), "cat: no tensors given");
  return autograd::cat(dd(xs[0]), std::span<const Tensor>(xs), dim);
}
Tensor stack(const std::vector<Tensor>& xs, int dim) {
  STRATA_CHECK(!xs.empty(), "stack: no tensors given");
  std::vector<Tensor> us;
  us.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    STRATA_CHECK(xs[i].defined() && xs[i].sizes() == xs[0].sizes(), "stack: tensor ", i, " ",
                 xs[i].defined() ? xs[i].str() : "(undefined)", " differs from tensor 0 ", xs[0].str());
    us.push_back(xs[i].unsqueeze(dim));
  }
  return cat(us, dim);
}
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int dim) {
  STRATA_CHECK(x.defined() && x.dim() >= 1, "split: needs a tensor with at least one dim");
  STRATA_CHECK(split_size >= 1, "split: split_size must be positive, got ", split_size);
  const int w = ops::wrap_dim("split", dim, x.dim());
  std::vector<Tensor> out;
  for (int64_t s = 0; s < x.size(w); s += split_size) out.push_back(x.slice(w, s, s + split_size));
  return out;
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int dim) {
  STRATA_CHECK(chunks >= 1, "chunk: chunks must be positive, got ", chunks);
  STRATA_CHECK(x.defined() && x.dim() >= 1, "chunk: needs a tensor with at least one dim");
  const int w = ops::wrap_dim("chunk", dim, x.dim());
  return split(x, std::max<int64_t>(1, (x.size(w) + chunks - 1) / chunks), w);
}

namespace {
// i64 values of an integer tensor on the host (one read of a device tensor).
std::vector<int64_t> host_indices(std::string_view op, const Tensor& t) {
  STRATA_CHECK(t.dtype() == DType::i64 || t.dtype() == DType::i32 || t.dtype() == DType::u8, op, ": argument '",
               op == "masked_select" ? "mask" : "index", "' must be an integer tensor (i64, i32 or u8), got ", t.str());
  return t.to(Device::cpu()).contiguous().to_vector<int64_t>();
}
}  // namespace

namespace {
// The positions in x (row-major, dense) that index picks along `dim` (gather's and scatter_add's
// rule: index of x's rank, no larger than `bound` in the other dims), on x's device.
Tensor flat_positions(std::string_view op, const Shape& x_sizes, int dim, const Tensor& index, const Shape& bound,
                      Device device) {
  STRATA_CHECK(index.dim() == x_sizes.size() && x_sizes.size() >= 1, op, ": index ", index.str(),
               " must have the rank of input ", x_sizes.str());
  for (int d = 0; d < x_sizes.size(); ++d)
    STRATA_CHECK(d == dim || index.size(d) <= bound[d], op, ": index ", index.sizes().str(), " is larger than ",
                 bound.str(), " in dim ", d);
  const std::vector<int64_t> v = host_indices(op, index);
  const Shape xs = contiguous_strides(x_sizes);
  std::vector<int64_t> flat(v.size());
  std::array<int64_t, kMaxDims> at{};
  for (size_t k = 0; k < v.size(); ++k) {
    STRATA_CHECK(v[k] >= 0 && v[k] < x_sizes[dim], op, ": argument 'index': value ", v[k], " at position ", k,
                 " is out of range for dim ", dim, " of size ", x_sizes[dim]);
    int64_t off = 0;
    for (int d = 0; d < x_sizes.size(); ++d) off += (d == dim ? v[k] : at[d]) * xs[d];
    flat[k] = off;
    for (int d = x_sizes.size() - 1; d >= 0; --d) {  // the next position of index, row-major
      if (++at[d] < index.size(d)) break;
      at[d] = 0;
    }
  }
  Tensor positions = Tensor::from_vector(flat, Shape{static_cast<int64_t>(flat.size())});
  return positions.to(device);
}

// y [n] = zeros with x's elements added at `positions` (index_add), recorded: its backward picks
// the gradient's elements back (index_select).
class ScatterNode final : public autograd::detail::NodeT<ops::VirtualDispatch> {
 public:
  ScatterNode(const ops::VirtualDispatch& d, Tensor positions) : NodeT(d), positions_(std::move(positions)) {}
  std::string_view name() const override { return "scatter_add"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {ops::index_select(d_, dy, 0, positions_)}; }
  void release() override { positions_ = Tensor(); }

 private:
  Tensor positions_;
};
}  // namespace

Tensor gather(const Tensor& x, int dim, const Tensor& index) {
  STRATA_CHECK(x.defined() && index.defined(), "gather: an argument is an undefined tensor");
  const int w = ops::wrap_dim("gather", dim, x.dim());
  const Tensor positions = flat_positions("gather", x.sizes(), w, index, x.sizes(), x.device());
  return x.reshape({x.numel()}).index_select(0, positions).reshape(index.sizes());
}

Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src) {
  STRATA_CHECK(x.defined() && index.defined() && src.defined(), "scatter_add: an argument is an undefined tensor");
  const int w = ops::wrap_dim("scatter_add", dim, x.dim());
  STRATA_CHECK(src.dim() == x.dim(), "scatter_add: src ", src.str(), " must have the rank of input ", x.str());
  Shape bound = x.sizes();  // index no larger than src anywhere, nor than x outside dim
  for (int d = 0; d < x.dim(); ++d) bound[d] = d == w ? src.size(d) : std::min(x.size(d), src.size(d));
  STRATA_CHECK(index.dim() == x.dim() && index.size(w) <= src.size(w), "scatter_add: index ", index.str(),
               " is larger than src ", src.sizes().str(), " in dim ", w);
  const Tensor positions = flat_positions("scatter_add", x.sizes(), w, index, bound, x.device());
  Tensor part = src;  // src's elements at index's positions
  for (int d = 0; d < src.dim(); ++d)
    if (index.size(d) < src.size(d)) part = part.slice(d, 0, index.size(d));
  const Tensor flat_src = part.reshape({part.numel()});
  const ops::VirtualDispatch& d = dd(x);
  Tensor scattered = ops::index_add(d, flat_src, 0, positions, Shape{x.numel()});
  if (autograd::any_requires_grad({&flat_src}))
    autograd::attach(std::make_shared<ScatterNode>(d, positions), {&flat_src}, scattered);
  return x + scattered.reshape(x.sizes());
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  STRATA_CHECK(x.defined() && mask.defined(), "masked_select: an argument is an undefined tensor");
  const Shape sizes = ops::broadcast_shape("masked_select", x.sizes(), mask.sizes());
  const std::vector<int64_t> m = host_indices("masked_select", ops::expand_to("masked_select", mask, sizes));
  std::vector<int64_t> flat;
  for (size_t k = 0; k < m.size(); ++k)
    if (m[k] != 0) flat.push_back(static_cast<int64_t>(k));
  const Tensor positions = Tensor::from_vector(flat, Shape{static_cast<int64_t>(flat.size())}).to(x.device());
  const Tensor ex = x.sizes() == sizes ? x : x.expand(sizes);
  return ex.reshape({ex.numel()}).index_select(0, positions);
}

}  // namespace strata
