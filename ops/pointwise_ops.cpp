#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
Tensor relu(const D& d, const Tensor& x) {
  validate_relu(d, x);
  Tensor y = Tensor::empty_like(x, x.sizes());
  d.relu_fwd(ReluFwdArgs{x, y});
  return y;
}

template <class D>
Tensor relu_bwd(const D& d, const Tensor& y, const Tensor& dy) {
  validate_relu_bwd(d, y, dy);
  Tensor dx = Tensor::empty_like(y, y.sizes());
  d.relu_bwd(ReluBwdArgs{y, dy, dx});
  return dx;
}

template <class D>
Tensor add(const D& d, const Tensor& a, const Tensor& b) {
  validate_add(d, a, b);
  Tensor y = Tensor::empty_like(a, a.sizes());
  d.add(AddArgs{a, b, y});
  return y;
}

template <class D>
Tensor scale(const D& d, const Tensor& x, double alpha) {
  validate_scale(d, x);
  Tensor y = Tensor::empty_like(x, x.sizes());
  d.scale(ScaleArgs{x, y, alpha});
  return y;
}

template <class D>
void axpy_(const D& d, const Tensor& x, const Tensor& y, double alpha) {
  validate_axpy(d, x, y);
  y.note_write();
  d.axpy(AxpyArgs{x, y, alpha});
}

template <class D>
DropoutOut dropout(const D& d, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  validate_dropout(d, x, p);
  DropoutOut out{Tensor::empty_like(x, x.sizes()), Tensor::empty_like(x, x.sizes(), DType::u8)};
  DropoutFwdArgs a{x, out.y, out.mask};
  a.p = p;
  a.seed = seed;
  a.offset = offset;
  d.dropout_fwd(a);
  return out;
}

template <class D>
Tensor dropout_bwd(const D& d, const Tensor& dy, const Tensor& mask, double p) {
  validate_dropout_bwd(d, dy, mask);
  Tensor dx = Tensor::empty_like(dy, dy.sizes());
  DropoutBwdArgs a{dy, mask, dx};
  a.p = p;
  d.dropout_bwd(a);
  return dx;
}

template <class D>
Tensor sum(const D& d, const Tensor& x) {
  validate_reduce_all(d, OpId::sum, x);
  Tensor y = Tensor::empty(Shape{}, x.dtype(), x.device());
  d.sum(ReduceArgs{x, y});
  return y;
}

template <class D>
Tensor mean(const D& d, const Tensor& x) {
  validate_reduce_all(d, OpId::mean, x);
  Tensor y = Tensor::empty(Shape{}, x.dtype(), x.device());
  d.mean(ReduceArgs{x, y});
  return y;
}

template <class D>
Tensor argmax(const D& d, const Tensor& x) {
  validate_argmax(d, x);
  Tensor y = Tensor::empty(Shape{x.size(0)}, DType::i64, x.device());
  d.argmax(ArgmaxArgs{x, y});
  return y;
}

template <class D>
void fill_(const D& d, const Tensor& y, double value) {
  validate_fill(d, y);
  y.note_write();
  d.fill(FillArgs{y, value});
}

template <class D>
Tensor full(const D& d, const Shape& sizes, DType dt, double value) {
  Tensor y = Tensor::empty(sizes, dt, d.device());
  fill_(d, y, value);
  return y;
}

template <class D>
void copy_(const D& d, const Tensor& src, const Tensor& dst) {
  validate_copy(d, src, dst);
  dst.note_write();
  d.copy(CopyArgs{src, dst});
}

template <class D>
Tensor to(const D& d, const Tensor& x, DType dt, Device dev, MemoryFormat fmt) {
  check_defined("copy", "source", x);
  if (x.dtype() == dt && x.device() == dev &&
      (fmt == MemoryFormat::contiguous ? x.is_contiguous() : x.is_channels_last()))
    return x;
  Tensor y = Tensor::empty(x.sizes(), dt, dev, fmt);
  copy_(d, x, y);
  return y;
}

#define STRATA_OPS_INSTANTIATE(D)                                                              \
  template Tensor relu<D>(const D&, const Tensor&);                                           \
  template Tensor relu_bwd<D>(const D&, const Tensor&, const Tensor&);                        \
  template Tensor add<D>(const D&, const Tensor&, const Tensor&);                             \
  template Tensor scale<D>(const D&, const Tensor&, double);                                  \
  template void axpy_<D>(const D&, const Tensor&, const Tensor&, double);                     \
  template DropoutOut dropout<D>(const D&, const Tensor&, double, uint64_t, uint64_t);        \
  template Tensor dropout_bwd<D>(const D&, const Tensor&, const Tensor&, double);             \
  template Tensor sum<D>(const D&, const Tensor&);                                            \
  template Tensor mean<D>(const D&, const Tensor&);                                           \
  template Tensor argmax<D>(const D&, const Tensor&);                                         \
  template void fill_<D>(const D&, const Tensor&, double);                                    \
  template Tensor full<D>(const D&, const Shape&, DType, double);                             \
  template void copy_<D>(const D&, const Tensor&, const Tensor&);                             \
  template Tensor to<D>(const D&, const Tensor&, DType, Device, MemoryFormat);
STRATA_OPS_INSTANTIATE_ALL()

}  // namespace strata::ops
