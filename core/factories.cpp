#include "strata/core/factories.h"

#include <cmath>
#include <limits>

#include "strata/core/dtype_dispatch.h"

namespace strata {

namespace {

// Significand bits of a floating storage type: the integers of magnitude up to 2^digits
// are exact in it.
template <class T>
constexpr int digits() {
  if constexpr (std::is_same_v<T, f16_t>)
    return 11;
  else if constexpr (std::is_same_v<T, bf16_t>)
    return 8;
  else
    return std::numeric_limits<T>::digits;
}

template <class T>
constexpr bool is_float_storage() {
  return std::is_floating_point_v<T> || std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>;
}

void check_sizes(const char* who, const Shape& sizes) {
  for (int64_t s : sizes) STRATA_CHECK(s >= 0, who, ": negative size in ", sizes.str());
}

Tensor on_device(const Tensor& host, Device device) {
  if (device.is_cpu()) return host;
  Tensor t = Tensor::empty(host.sizes(), host.dtype(), device);
  copy_into(host, t);
  return t;
}

// A new tensor whose element i (row-major) is value(T{}, i), made on the host in
// order (random factories depend on the order) and copied to `device` once.
template <class Value>
Tensor generate(const char* who, const Shape& sizes, DType dtype, Device device, Value&& value) {
  check_sizes(who, sizes);
  Tensor host = Tensor::empty(sizes, dtype, Device::cpu());
  const int64_t n = host.numel();
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(host.data_ptr());
    for (int64_t i = 0; i < n; ++i) p[i] = value(tag, i);
  });
  return on_device(host, device);
}

// Whether every integer in [lo, hi] is exactly a value of dtype.
bool holds_integers(DType dtype, int64_t lo, int64_t hi) {
  return visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_storage<T>()) {
      const int64_t exact = int64_t{1} << digits<T>();
      return lo >= -exact && hi <= exact;
    } else {
      return lo >= static_cast<int64_t>(std::numeric_limits<T>::lowest()) &&
             hi <= static_cast<int64_t>(std::numeric_limits<T>::max());
    }
  });
}

void check_floating(const char* who, DType dtype) {
  STRATA_CHECK(is_floating(dtype), who, ": dtype must be floating (f32, f64, f16, bf16), got ", dtype_name(dtype));
}

}  // namespace

Tensor full(const Shape& sizes, double value, DType dtype, Device device) {
  if (is_floating(dtype)) {
    const double stored = visit_dtype(dtype, [&](auto tag) {
      return convert_element<double>(convert_element<decltype(tag)>(value));
    });
    STRATA_CHECK(!std::isfinite(value) || std::isfinite(stored), "full: value ", value, " overflows ",
                 dtype_name(dtype));
  } else {
    STRATA_CHECK(std::isfinite(value) && value == std::trunc(value) && std::abs(value) <= 0x1.0p53 &&
                     holds_integers(dtype, static_cast<int64_t>(value), static_cast<int64_t>(value)),
                 "full: value ", value, " is not an integer that ", dtype_name(dtype), " can hold");
  }
  return generate("full", sizes, dtype, device,
                  [&](auto tag, int64_t) { return convert_element<decltype(tag)>(value); });
}

Tensor zeros(const Shape& sizes, DType dtype, Device device) { return full(sizes, 0.0, dtype, device); }
Tensor ones(const Shape& sizes, DType dtype, Device device) { return full(sizes, 1.0, dtype, device); }

Tensor rand(const Shape& sizes, Generator& gen, DType dtype, Device device) {
  check_floating("rand", dtype);
  return generate("rand", sizes, dtype, device, [&](auto tag, int64_t) {
    using T = decltype(tag);
    return convert_element<T>(gen.uniform_bits(std::min(digits<T>(), 53)));
  });
}

Tensor randn(const Shape& sizes, Generator& gen, DType dtype, Device device) {
  check_floating("randn", dtype);
  return generate("randn", sizes, dtype, device,
                  [&](auto tag, int64_t) { return convert_element<decltype(tag)>(gen.normal()); });
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, Generator& gen, DType dtype, Device device) {
  STRATA_CHECK(low < high, "randint: needs low < high, got low ", low, ", high ", high);
  STRATA_CHECK(holds_integers(dtype, low, high - 1), "randint: ", dtype_name(dtype), " cannot hold every integer of [",
               low, ", ", high, ")");
  return generate("randint", sizes, dtype, device,
                  [&](auto tag, int64_t) { return convert_element<decltype(tag)>(gen.integer(low, high)); });
}

Tensor rand(const Shape& sizes, DType dtype, Device device) {
  return with_generator(nullptr, [&](Generator& g) { return rand(sizes, g, dtype, device); });
}
Tensor randn(const Shape& sizes, DType dtype, Device device) {
  return with_generator(nullptr, [&](Generator& g) { return randn(sizes, g, dtype, device); });
}
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype, Device device) {
  return with_generator(nullptr, [&](Generator& g) { return randint(low, high, sizes, g, dtype, device); });
}

Tensor arange_as(double start, double end, double step, DType dtype, Device device) {
  STRATA_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange: start ", start, ", end ",
               end, " and step ", step, " must be finite");
  STRATA_CHECK(step != 0, "arange: step must be nonzero");
  STRATA_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange: step ", step,
               " does not lead from start ", start, " to end ", end);
  const double count = std::ceil((end - start) / step);
  STRATA_CHECK(count < 0x1.0p53, "arange: [", start, ", ", end, ") in steps of ", step, " has too many elements");
  const auto n = static_cast<int64_t>(count);
  if (!is_floating(dtype)) {
    STRATA_CHECK(start == std::trunc(start) && step == std::trunc(step) && std::abs(start) <= 0x1.0p53 &&
                     std::abs(step) <= 0x1.0p53,
                 "arange: ", dtype_name(dtype), " needs integer start and step, got start ", start, ", step ", step);
    const auto first = static_cast<int64_t>(start), stride = static_cast<int64_t>(step);
    const int64_t last = n == 0 ? first : first + (n - 1) * stride;
    STRATA_CHECK(holds_integers(dtype, std::min(first, last), std::max(first, last)), "arange: ", dtype_name(dtype),
                 " cannot hold the values from ", first, " to ", last);
    return generate("arange", Shape{n}, dtype, device,
                    [&](auto tag, int64_t i) { return convert_element<decltype(tag)>(first + i * stride); });
  }
  return generate("arange", Shape{n}, dtype, device, [&](auto tag, int64_t i) {
    return convert_element<decltype(tag)>(start + static_cast<double>(i) * step);
  });
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& s, Device device) {
  check_sizes("from_vector", s);
  STRATA_CHECK(s.checked_numel() == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
               " values do not fill shape ", s.str(), " (", s.checked_numel(), " elements)");
  return on_device(Tensor::from_vector(values, s), device);
}

#define STRATA_INSTANTIATE(T) template Tensor from_vector<T>(const std::vector<T>&, const Shape&, Device);
STRATA_INSTANTIATE(float)
STRATA_INSTANTIATE(double)
STRATA_INSTANTIATE(int32_t)
STRATA_INSTANTIATE(int64_t)
STRATA_INSTANTIATE(uint8_t)
#undef STRATA_INSTANTIATE

Tensor empty_like(const Tensor& x) { return Tensor::empty(x.sizes(), x.dtype(), x.device()); }
Tensor zeros_like(const Tensor& x) { return zeros(x.sizes(), x.dtype(), x.device()); }
Tensor ones_like(const Tensor& x) { return ones(x.sizes(), x.dtype(), x.device()); }
Tensor full_like(const Tensor& x, double value) { return full(x.sizes(), value, x.dtype(), x.device()); }
Tensor rand_like(const Tensor& x, Generator& gen) { return rand(x.sizes(), gen, x.dtype(), x.device()); }
Tensor rand_like(const Tensor& x) { return rand(x.sizes(), x.dtype(), x.device()); }
Tensor randn_like(const Tensor& x, Generator& gen) { return randn(x.sizes(), gen, x.dtype(), x.device()); }
Tensor randn_like(const Tensor& x) { return randn(x.sizes(), x.dtype(), x.device()); }

}  // namespace strata
