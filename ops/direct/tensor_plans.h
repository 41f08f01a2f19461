#pragma once
// Direct-mode plans of the tensor API's ops that networks beyond the CNNs need (a pointwise.def
// formula, the batched matrix product, index_select and its adjoint, a reduction over dims),
// made as ops/direct/plans.h makes its plans: each op bound by its one definition (ops/bind/),
// the front end's, so both refuse the same calls with the same messages and allocate the same
// outputs (here in the step's memory); one run_kernel per op when run.
// Where the front end would copy an operand a kernel cannot read as it is (a reshape that is
// no view, a matrix no GEMM reads), the plan holds a planned buffer and copies into it at each
// run, so the copy follows the operand's new values as the front end's would.
#include <span>
#include <vector>

#include "strata/core/factories.h"
#include "strata/ops/bind/pointwise.h"
#include "strata/ops/bind/tensor.h"
#include "strata/ops/direct/cast_plans.h"
#include "strata/ops/direct/kernel_call.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/table/gemm_layout.h"
#include "strata/ops/tensor_ops.h"
#include "strata/ops/validate.h"
#include "strata/ops/validate_tensor.h"

namespace strata::ops::direct {

using backends::BackendImpl;

// x seen as `sizes` by ops::view_or_copy's rule: a view when the strides allow, else a planned
// contiguous buffer that `copy` (planned anew) fills at each copy.run(), which does nothing for a view.
template <BackendImpl Impl>
Tensor planned_view_or_copy(Impl& impl, const Tensor& x, const Shape& sizes, CastPlan<Impl>& copy) {
  copy = {};
  if (auto st = view_strides(x.sizes(), x.strides(), sizes)) return x.as_strided(sizes, *st, x.offset());
  copy.plan_into(impl, x, planned_empty(x.sizes(), x.dtype(), x.device()));
  return copy.y.view(sizes);
}

// y = f(x) for a formula of pointwise.def (ops::unary), and its backward, which reads x and y.
template <BackendImpl Impl>
class UnaryPlan {
 public:
  Tensor y, dx;
  void plan(Impl& impl, const Tensor& x, UnaryFn fn, double p0 = 0.0, double p1 = 0.0) {
    impl_ = &impl;
    auto bound = bind::unary_fwd(StaticDispatch<Impl>(impl), fn, x, p0, p1);
    y = bound.out;
    fwd_ = bound.args;
    x_ = x;
  }
  void plan_backward(const Tensor& dy) {
    auto bound = bind::unary_bwd(StaticDispatch<Impl>(*impl_), fwd_.fn, x_, y, dy, fwd_.p0, fwd_.p1);
    dx = bound.out;
    bwd_ = bound.args;
  }
  void forward() { run_kernel<OpId::unary_fwd>(*impl_, fwd_); }
  void backward() { run_kernel<OpId::unary_bwd>(*impl_, bwd_); }

 private:
  Impl* impl_ = nullptr;
  Tensor x_;
  UnaryFwdArgs fwd_;
  UnaryBwdArgs bwd_;
};

// y[i] = alpha a[i] b[i] (ops::bmm): a [B or 1, M, K], b [B or 1, K, N], y [B, M, N]. An operand
// no GEMM reads as it is (ops/table/gemm_layout.h) is copied into a planned buffer before each
// product, where the front end copies it before its call.
template <BackendImpl Impl>
class BmmPlan {
 public:
  Tensor y;
  void plan(Impl& impl, const Tensor& a, const Tensor& b, double alpha = 1.0) {
    impl_ = &impl;
    int i = 0;  // the binding asks for a's operand, then b's
    auto bound = bind::bmm(StaticDispatch<Impl>(impl), a, b, alpha, [&](const Tensor& t, int64_t batch) {
      return operand(impl, t, batch, i++ == 0 ? a_copy_ : b_copy_);
    });
    y = bound.out.result;
    a_ = bound.out.reads[0];
    b_ = bound.out.reads[1];
    args_ = bound.args;
  }
  void forward() {
    a_copy_.run();
    b_copy_.run();
    run_kernel<OpId::bmm>(*impl_, args_);
  }

 private:
  // The front end's gemm_operand: t, or its contiguous copy, with a batch of one broadcast.
  static Tensor operand(Impl& impl, const Tensor& t, int64_t batch, CastPlan<Impl>& copy) {
    copy = {};
    Tensor r = t;
    if (!gemm_layout(t)) {
      copy.plan_into(impl, t, planned_empty(t.sizes(), t.dtype(), t.device()));
      r = copy.y;
    }
    if (r.size(0) == batch) return r;
    return r.as_strided({batch, r.size(1), r.size(2)}, {0, r.strides()[1], r.strides()[2]}, r.offset());
  }

  Impl* impl_ = nullptr;
  Tensor a_, b_;  // what the product reads, kept alive
  CastPlan<Impl> a_copy_, b_copy_;
  BmmArgs args_;
};

// The index whose values a plan's checks read. A memory plan's recording pass (step_memory.h)
// notes the copy that fills an index (a model's input) without running it, so zeros of the
// index's sizes and dtype stand in there: the values are checked when the step is planned for
// real, and every other check sees the same tensor.
inline Tensor index_to_check(const Tensor& index) {
  if (!recording() || !index.defined() || index.device().type != DeviceType::cpu) return index;
  return zeros(index.sizes(), index.dtype(), index.device());
}

// y = x with dim `dim` replaced by x's rows at `index` (ops::index_select). The index is bound
// as it is: its values are checked here, and the CPU kernels check each value they read (with
// the front end's message), so new values written into it later are checked at each run.
template <BackendImpl Impl>
class IndexSelectPlan {
 public:
  Tensor y;
  void plan(Impl& impl, const Tensor& x, int dim, const Tensor& index) {
    impl_ = &impl;
    auto bound = bind::index_select(StaticDispatch<Impl>(impl), x, dim, index, index_to_check(index));
    y = bound.out;
    args_ = bound.args;
    x_ = x;
    index_ = index;
  }
  void forward() { run_kernel<OpId::index_select>(*impl_, args_); }

 private:
  Impl* impl_ = nullptr;
  Tensor x_, index_;
  IndexSelectArgs args_;
};

// y = zeros of `sizes` with x's rows added at `index` along dim (ops::index_add, index_select's
// adjoint): the front end's fill and index_add, into `into` (a gradient's buffer) when given.
template <BackendImpl Impl>
class IndexAddPlan {
 public:
  Tensor y;
  void plan(Impl& impl, const Tensor& x, int dim, const Tensor& index, const Shape& sizes,
            const Tensor& into = Tensor()) {
    impl_ = &impl;
    const StaticDispatch<Impl> d(impl);
    auto bound = bind::index_add(d, x, dim, index, index_to_check(index), sizes, into);
    y = bound.out;
    add_ = bound.args;
    zero_ = bind::fill(d, y, 0.0).args;
    x_ = x;
    index_ = index;
  }
  void forward() {
    run_kernel<OpId::fill>(*impl_, zero_);
    run_kernel<OpId::index_add>(*impl_, add_);
  }

 private:
  Impl* impl_ = nullptr;
  Tensor x_, index_;
  FillArgs zero_;
  IndexAddArgs add_;
};

// fn over `dims` of x (ops::reduce with keepdim): y has x's rank, the reduced dims of size 1.
// sum, mean, max and min (argmax and argmin over the flattened input are the front end's).
template <BackendImpl Impl>
class ReducePlan {
 public:
  Tensor y;
  void plan(Impl& impl, ReduceFn fn, const Tensor& x, std::span<const int> dims) {
    STRATA_CHECK(fn != ReduceFn::argmax && fn != ReduceFn::argmin, reduce_name(fn),
                 ": direct mode plans sum, mean, max and min (internal error)");
    impl_ = &impl;
    auto bound = bind::reduce_dims(StaticDispatch<Impl>(impl), fn, x, dims);
    y = bound.out;
    args_ = bound.args;
    x_ = x;
  }
  void forward() { run_kernel<OpId::reduce_dims>(*impl_, args_); }

 private:
  Impl* impl_ = nullptr;
  Tensor x_;
  ReduceDimsArgs args_;
};

}  // namespace strata::ops::direct
