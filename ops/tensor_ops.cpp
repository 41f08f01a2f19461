// The front end of the tensor API's ops (ops/tensor_ops.h): broadcasting and dims, then
// validate (ops/validate_tensor.h), allocate and call the backend once.
#include "strata/ops/tensor_ops.h"

#include <algorithm>

#include "strata/ops/broadcast.h"
#include "strata/ops/frontend_support.h"
#include "strata/ops/table/gemm_layout.h"
#include "strata/ops/validate_tensor.h"

namespace strata::ops {

Shape broadcast_shape(std::string_view op, const Shape& a, const Shape& b) {
  const int n = std::max(a.size(), b.size());
  Shape out;
  for (int i = 0; i < n; ++i) {
    const int ia = i - (n - a.size()), ib = i - (n - b.size());
    const int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    STRATA_CHECK(sa == sb || sa == 1 || sb == 1, op, ": shapes ", a.str(), " and ", b.str(),
                 " do not broadcast (dim ", i, " of the result: ", sa, " vs ", sb, ")");
    out.push_back(sa == 1 ? sb : sa);
  }
  return out;
}

Tensor expand_to(std::string_view op, const Tensor& x, const Shape& sizes) {
  if (x.sizes() == sizes) return x;
  STRATA_CHECK(x.dim() <= sizes.size(), op, ": cannot expand ", x.str(), " to ", sizes.str(), " (more dims)");
  Shape st;
  const int lead = sizes.size() - x.dim();
  for (int i = 0; i < sizes.size(); ++i) {
    const int j = i - lead;
    if (j < 0) {
      st.push_back(0);
      continue;
    }
    STRATA_CHECK(x.size(j) == sizes[i] || x.size(j) == 1, op, ": cannot expand ", x.str(), " to ", sizes.str(),
                 " (dim ", j, " has size ", x.size(j), ", not 1 or ", sizes[i], ")");
    st.push_back(x.size(j) == sizes[i] ? x.strides()[j] : 0);
  }
  return x.as_strided(sizes, st, x.offset());
}

int wrap_dim(std::string_view op, int dim, int rank) {
  const int r = std::max(rank, 1);
  STRATA_CHECK(dim >= -r && dim < r, op, ": dim ", dim, " is out of range for a tensor of rank ", rank,
               " (expected one in [", -r, ", ", r - 1, "])");
  return dim < 0 ? dim + r : dim;
}

std::vector<bool> reduce_mask(std::string_view op, std::span<const int> dims, int rank) {
  std::vector<bool> mask(rank, dims.empty());
  for (int d : dims) {
    const int w = wrap_dim(op, d, rank);
    if (rank == 0) continue;
    STRATA_CHECK(!mask[w], op, ": dim ", w, " appears more than once in the dims to reduce");
    mask[w] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& sizes, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (int i = 0; i < sizes.size(); ++i) {
    if (!mask[i]) out.push_back(sizes[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Broadcast broadcast(std::string_view op, const Tensor& a, const Tensor& b) {
  check_defined(op, "a", a);
  check_defined(op, "b", b);
  const Shape sizes = broadcast_shape(op, a.sizes(), b.sizes());
  return {sizes, expand_to(op, a, sizes), expand_to(op, b, sizes)};
}

Tensor output_like(const Tensor& a, const Tensor& b, const Shape& sizes, DType dt) {
  if (a.sizes() == sizes) return Tensor::empty_like(a, sizes, dt);
  if (b.sizes() == sizes) return Tensor::empty_like(b, sizes, dt);
  return Tensor::empty(sizes, dt, a.device());
}

Tensor view_or_copy(const Tensor& x, const Shape& sizes) {
  if (auto st = view_strides(x.sizes(), x.strides(), sizes)) return x.as_strided(sizes, *st, x.offset());
  return x.contiguous().view(sizes);
}

namespace {
// x seen as rank 1.
Tensor flat(const Tensor& x) { return view_or_copy(x, Shape{x.numel()}); }
// A bmm operand the GEMM libraries can read (ops/table/gemm_layout.h), batch broadcast to B.
Tensor gemm_operand(const Tensor& t, int64_t batch) {
  const Tensor r = gemm_layout(t) ? t : t.contiguous();
  if (r.size(0) == batch) return r;
  return r.as_strided({batch, r.size(1), r.size(2)}, {0, r.strides()[1], r.strides()[2]}, r.offset());
}
}  // namespace

template <class D>
Tensor compare(const D& d, CompareFn fn, const Tensor& a, const Tensor& b) {
  const Broadcast e = broadcast(compare_name(fn), a, b);
  validate_compare(d, fn, e.a, e.b);
  Tensor y = output_like(a, b, e.sizes, DType::u8);
  d.compare(CompareArgs{e.a, e.b, y, fn});
  return y;
}

template <class D>
Tensor where(const D& d, const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", "condition", cond);
  check_defined("where", "a", a);
  check_defined("where", "b", b);
  const Shape out = broadcast_shape("where", broadcast_shape("where", cond.sizes(), a.sizes()), b.sizes());
  const Tensor ec = expand_to("where", cond, out), ea = expand_to("where", a, out), eb = expand_to("where", b, out);
  validate_where(d, ec, ea, eb);
  Tensor y = output_like(a, b, out, a.dtype());
  d.where(WhereArgs{ec, ea, eb, y});
  return y;
}

template <class D>
Tensor reduce(const D& d, ReduceFn fn, const Tensor& x, std::span<const int> dims, bool keepdim) {
  check_defined(reduce_name(fn), "input", x);
  const bool arg = fn == ReduceFn::argmax || fn == ReduceFn::argmin;
  if (arg && dims.empty() && x.dim() != 1) {  // PyTorch: the position in the flattened input
    const Tensor r = reduce(d, fn, flat(x), dims, false);
    if (!keepdim) return r;
    Shape ones;
    for (int i = 0; i < x.dim(); ++i) ones.push_back(1);
    return r.view(ones);
  }
  const std::vector<bool> mask = validate_reduce(d, fn, x, dims);
  const Shape keep = reduced_shape(x.sizes(), mask, true);
  Tensor y = Tensor::empty(keep, arg ? DType::i64 : x.dtype(), x.device());
  d.reduce_dims(ReduceDimsArgs{x, y, fn});
  return keepdim ? y : y.view(reduced_shape(x.sizes(), mask, false));
}

template <class D>
Tensor softmax(const D& d, const Tensor& x, int dim, bool log) {
  check_defined(log ? "log_softmax" : "softmax", "input", x);
  const int w = validate_softmax(d, x, dim, log);
  if (x.dim() == 0) return softmax(d, x.view({1}), 0, log).view(Shape{});
  Tensor y = Tensor::empty_like(x, x.sizes());
  d.softmax_fwd(SoftmaxArgs{x, y, w, log});
  return y;
}

template <class D>
Tensor softmax_bwd(const D& d, const Tensor& y, const Tensor& dy, int dim, bool log) {
  const int w = validate_softmax_bwd(d, y, dy, dim, log);
  if (y.dim() == 0) return softmax_bwd(d, y.view({1}), dy.contiguous().view({1}), 0, log).view(Shape{});
  Tensor dx = Tensor::empty_like(y, y.sizes());
  d.softmax_bwd(SoftmaxBwdArgs{y, dy, dx, w, log});
  return dx;
}

template <class D>
Tensor bmm(const D& d, const Tensor& a, const Tensor& b, double alpha) {
  const Shape out = validate_bmm(d, a, b);
  Tensor y = Tensor::empty(out, a.dtype(), a.device());
  d.bmm(BmmArgs{gemm_operand(a, out[0]), gemm_operand(b, out[0]), y, alpha});
  return y;
}

template <class D>
Tensor index_select(const D& d, const Tensor& x, int dim, const Tensor& index) {
  const int w = validate_index_select(d, x, dim, index);
  Shape out = x.sizes();
  out[w] = index.numel();
  Tensor y = Tensor::empty(out, x.dtype(), x.device());
  d.index_select(IndexSelectArgs{x, index, y, w});
  return y;
}

template <class D>
Tensor index_add(const D& d, const Tensor& x, int dim, const Tensor& index, const Shape& sizes) {
  const int w = validate_index_add(d, x, dim, index, sizes);
  Tensor y = full(d, sizes, x.dtype(), 0.0);
  d.index_add(IndexAddArgs{x, index, y, w});
  return y;
}

template <class D>
void index_add_(const D& d, const Tensor& y, int dim, const Tensor& index, const Tensor& x) {
  check_defined("index_add_", "self", y);
  check_same_dtype("index_add_", "self", y, "source", x);
  check_device("index_add_", "self", y, d.device(), d.backend_name());
  const int w = validate_index_add(d, x, dim, index, y.sizes());
  d.index_add(IndexAddArgs{x, index, y, w});
}

#define STRATA_OPS_INSTANTIATE(D)                                                                       \
  template Tensor compare<D>(const D&, CompareFn, const Tensor&, const Tensor&);                        \
  template Tensor where<D>(const D&, const Tensor&, const Tensor&, const Tensor&);                       \
  template Tensor reduce<D>(const D&, ReduceFn, const Tensor&, std::span<const int>, bool);             \
  template Tensor softmax<D>(const D&, const Tensor&, int, bool);                                       \
  template Tensor softmax_bwd<D>(const D&, const Tensor&, const Tensor&, int, bool);                    \
  template Tensor bmm<D>(const D&, const Tensor&, const Tensor&, double);                               \
  template Tensor index_select<D>(const D&, const Tensor&, int, const Tensor&);                         \
  template Tensor index_add<D>(const D&, const Tensor&, int, const Tensor&, const Shape&);               \
  template void index_add_<D>(const D&, const Tensor&, int, const Tensor&, const Tensor&);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
