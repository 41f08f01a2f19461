#include "strata/nn/layers/layer_util.h"

namespace strata::nn::detail {

namespace {
template <class T>
bool write_direct(const Tensor& t, const std::vector<double>* values, double value) {
  if (t.dtype() != dtype_of<T>::value || !t.device().is_cpu() || !t.is_contiguous()) return false;
  T* p = static_cast<T*>(t.data_ptr());
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(values ? (*values)[static_cast<size_t>(i)] : value);
  return true;
}
}  // namespace

Tensor make_filled(Device dev, const Shape& sizes, DType dt, double value) {
  Tensor t = Tensor::empty(sizes, dt, dev);
  if (write_direct<float>(t, nullptr, value) || write_direct<double>(t, nullptr, value) ||
      write_direct<int64_t>(t, nullptr, value))
    return t;
  assign_host(t, std::vector<double>(static_cast<size_t>(sizes.numel()), value));
  return t;
}

void assign_host(const Tensor& t, const std::vector<double>& values) {
  STRATA_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "nn: ", values.size(), " values for ", t.str());
  // Convert on the host into t's dtype, then one same-dtype copy (a plain memcpy on
  // the CPU, the one transfer a device copy hook must support).
  if (write_direct<float>(t, &values, 0) || write_direct<double>(t, &values, 0) || write_direct<int64_t>(t, &values, 0))
    return;
  Tensor src;
  if (t.dtype() == DType::f32)
    src = Tensor::from_vector(std::vector<float>(values.begin(), values.end()), t.sizes());
  else if (t.dtype() == DType::f64)
    src = Tensor::from_vector(values, t.sizes());
  else {
    src = Tensor::empty(t.sizes(), t.dtype(), Device::cpu());
    copy_into(Tensor::from_vector(values, t.sizes()), src);
  }
  copy_into(src, t);
}

}  // namespace strata::nn::detail
