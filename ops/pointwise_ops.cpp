#include "strata/ops/bind/pointwise.h"
#include "strata/ops/frontend_support.h"

namespace strata::ops {

template <class D>
Tensor relu(const D& d, const Tensor& x) {
  return run_once(d, bind::relu_fwd(d, x));
}

template <class D>
Tensor relu_bwd(const D& d, const Tensor& y, const Tensor& dy) {
  return run_once(d, bind::relu_bwd(d, y, dy));
}

template <class D>
Tensor add(const D& d, const Tensor& a, const Tensor& b) {
  return run_once(d, bind::add(d, a, b));
}

template <class D>
Tensor scale(const D& d, const Tensor& x, double alpha) {
  return run_once(d, bind::scale(d, x, alpha));
}

template <class D>
void axpy_(const D& d, const Tensor& x, const Tensor& y, double alpha) {
  auto b = bind::axpy(d, x, y, alpha);
  y.note_write();
  run_once(d, std::move(b));
}

template <class D>
DropoutOut dropout(const D& d, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  return run_once(d, bind::dropout_fwd(d, x, p, seed, offset));
}

template <class D>
Tensor dropout_bwd(const D& d, const Tensor& dy, const Tensor& mask, double p) {
  return run_once(d, bind::dropout_bwd(d, dy, mask, p));
}

template <class D>
Tensor sum(const D& d, const Tensor& x) {
  return run_once(d, bind::reduce_all<OpId::sum>(d, x));
}

template <class D>
Tensor mean(const D& d, const Tensor& x) {
  return run_once(d, bind::reduce_all<OpId::mean>(d, x));
}

template <class D>
Tensor argmax(const D& d, const Tensor& x) {
  return run_once(d, bind::argmax(d, x));
}

template <class D>
void fill_(const D& d, const Tensor& y, double value) {
  auto b = bind::fill(d, y, value);
  y.note_write();
  run_once(d, std::move(b));
}

template <class D>
Tensor full(const D& d, const Shape& sizes, DType dt, double value) {
  Tensor y = Tensor::empty(sizes, dt, d.device());
  fill_(d, y, value);
  return y;
}

template <class D>
void copy_(const D& d, const Tensor& src, const Tensor& dst) {
  auto b = bind::copy(d, src, dst);
  dst.note_write();
  run_once(d, std::move(b));
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
