// copy: any dtype to any dtype, any strides to any strides, between CPU tensors.
// Cross-device copies belong to the backend of the non-CPU device.
#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"
#include "strata/core/dtype_dispatch.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using ref::for_each_element;

void ReferenceBackend::copy(const CopyArgs& a) {
  STRATA_CHECK(a.x.device.is_cpu() && a.y.device.is_cpu(),
               "copy: the reference backend copies between cpu tensors only, got ", a.x.device.str(), " -> ",
               a.y.device.str(), " (x ", dtype_name(a.x.dtype), a.x.sizes.str(), ", y ", dtype_name(a.y.dtype),
               a.y.sizes.str(), ")");
  visit_dtype(a.x.dtype, [&](auto xs) {
    using S = decltype(xs);
    visit_dtype(a.y.dtype, [&](auto ys) {
      using D = decltype(ys);
      const S* x = a.x.ptr<S>();
      D* y = a.y.ptr<D>();
      for_each_element([&](int64_t, int64_t ox, int64_t oy) { y[oy] = convert_element<D>(x[ox]); }, a.x, a.y);
    });
  });
}

}  // namespace strata::backends
