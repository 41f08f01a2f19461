// linear on OpenBLAS: y = x w^T + b, dx = dy w, dw = dy^T x as single GEMMs. Views
// whose row or column stride is 1 go to GEMM as they are (a transposed view becomes
// the transpose flag); others are packed first.
#include <algorithm>

#include "strata/backends/api/linear_epilogue.h"
#include "strata/backends/openblas/gemm.h"
#include "strata/backends/cpu/reduce.h"
#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using loops::visit_float;
using openblas::gemm;

namespace {

// A 2-D view as a GEMM operand: pointer, whether it is stored transposed, and the
// leading dimension of its storage.
template <class T>
struct Operand {
  const T* p;
  bool trans;
  int64_t ld;
};

template <class T>
Operand<T> operand(const TensorView& v, loops::Scratch& buf) {
  const int64_t rows = v.sizes[0], cols = v.sizes[1];
  if (v.strides[1] == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : v.strides[0];
    if (ld >= std::max<int64_t>(cols, 1)) return {v.ptr<const T>(), false, ld};
  }
  if (v.strides[0] == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : v.strides[1];
    if (ld >= std::max<int64_t>(rows, 1)) return {v.ptr<const T>(), true, ld};
  }
  T* packed = buf.get<T>(v.numel());
  loops::gather_contiguous(v, packed);
  return {packed, false, std::max<int64_t>(cols, 1)};
}

template <class T>
Operand<T> transposed(Operand<T> o) {
  o.trans = !o.trans;
  return o;
}

// C [m,n] = op(A) op(B) (+ C when accumulate), written to the view's strides.
template <class T>
void gemm_into(const TensorView& c, Operand<T> a, Operand<T> b, int64_t k, bool accumulate) {
  const int64_t m = c.sizes[0], n = c.sizes[1];
  if (c.strides[1] == 1 && c.strides[0] >= std::max<int64_t>(n, 1)) {
    gemm(a.trans, b.trans, m, n, k, T(1), a.p, a.ld, b.p, b.ld, accumulate ? T(1) : T(0), c.ptr<T>(), c.strides[0]);
    return;
  }
  loops::Scratch buf;
  T* tmp = buf.get<T>(m * n);
  if (accumulate) loops::gather_contiguous(c, tmp);
  gemm(a.trans, b.trans, m, n, k, T(1), a.p, a.ld, b.p, b.ld, accumulate ? T(1) : T(0), tmp, std::max<int64_t>(n, 1));
  loops::scatter_contiguous(tmp, c);
}

template <class T>
void forward(const LinearFwdArgs& a) {
  loops::Scratch bx, bw;
  const int64_t in = a.x.sizes[1];
  if (a.b.defined) {
    const T* b = a.b.ptr<const T>();
    T* y = a.y.ptr<T>();
    for (int64_t i = 0; i < a.y.sizes[0]; ++i)
      for (int64_t o = 0; o < a.y.sizes[1]; ++o) y[i * a.y.strides[0] + o * a.y.strides[1]] = b[o * a.b.strides[0]];
  }
  gemm_into<T>(a.y, operand<T>(a.x, bx), transposed(operand<T>(a.w, bw)), in, a.b.defined);
}

template <class T>
void backward_data(const LinearBwdDataArgs& a) {
  loops::Scratch bdy, bw;
  gemm_into<T>(a.dx, operand<T>(a.dy, bdy), operand<T>(a.w, bw), a.dy.sizes[1], false);
}

template <class T>
void backward_weight(const LinearBwdWeightArgs& a) {
  loops::Scratch bdy, bx;
  const Operand<T> dy = operand<T>(a.dy, bdy);
  gemm_into<T>(a.dw, transposed(dy), operand<T>(a.x, bx), a.x.sizes[0], false);
  if (a.db.defined) loops::column_sums<T>(a.dy, a.db);
}

}  // namespace

void OpenBlasBackend::linear_fwd(const LinearFwdArgs& a) {
  if (a.act || a.z.defined || a.norm_eps) return linear_fwd_composed(*this, a);
  visit_float(kName, "linear_fwd", a.x.dtype, [&](auto t) { forward<decltype(t)>(a); });
}
void OpenBlasBackend::linear_bwd_data(const LinearBwdDataArgs& a) {
  if (a.act) return linear_act_bwd_data_composed(*this, a);
  visit_float(kName, "linear_bwd_data", a.dy.dtype, [&](auto t) { backward_data<decltype(t)>(a); });
}
void OpenBlasBackend::linear_bwd_weight(const LinearBwdWeightArgs& a) {
  visit_float(kName, "linear_bwd_weight", a.x.dtype, [&](auto t) { backward_weight<decltype(t)>(a); });
}

}  // namespace strata::backends
