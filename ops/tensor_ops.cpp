// The front end of the tensor API's ops (ops/tensor_ops.h): broadcasting and dims, then
// validate (ops/validate_tensor.h), allocate and call the backend once.
#include "strata/ops/tensor_ops.h"

#include <algorithm>

#include "strata/ops/bind/pointwise.h"
#include "strata/ops/bind/tensor.h"
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
  return run_once(d, bind::compare(d, fn, a, b));
}

template <class D>
Tensor where(const D& d, const Tensor& cond, const Tensor& a, const Tensor& b) {
  return run_once(d, bind::where(d, cond, a, b));
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
  std::vector<bool> mask;
  const Tensor y = run_once(d, bind::reduce_dims(d, fn, x, dims, &mask));
  return keepdim ? y : y.view(reduced_shape(x.sizes(), mask, false));
}

template <class D>
Tensor softmax(const D& d, const Tensor& x, int dim, bool log) {
  return run_once(d, bind::softmax_fwd(d, x, dim, log));
}

template <class D>
Tensor softmax_bwd(const D& d, const Tensor& y, const Tensor& dy, int dim, bool log) {
  return run_once(d, bind::softmax_bwd(d, y, dy, dim, log));
}

template <class D>
Tensor bmm(const D& d, const Tensor& a, const Tensor& b, double alpha) {
  return run_once(d, bind::bmm(d, a, b, alpha, gemm_operand)).result;
}

template <class D>
Tensor index_select(const D& d, const Tensor& x, int dim, const Tensor& index) {
  return run_once(d, bind::index_select(d, x, dim, index, index));
}

template <class D>
Tensor index_add(const D& d, const Tensor& x, int dim, const Tensor& index, const Shape& sizes) {
  auto b = bind::index_add(d, x, dim, index, index, sizes);
  fill_(d, b.out, 0.0);
  return run_once(d, std::move(b));
}

template <class D>
void index_add_(const D& d, const Tensor& y, int dim, const Tensor& index, const Tensor& x) {
  run_once(d, bind::index_add_into(d, y, dim, index, index, x));
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
