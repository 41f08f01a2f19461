#pragma once
// copy between CPU views of any dtypes and any strides, converting as core's
// convert_element does (round-to-nearest-even into f16/bf16, C++ casts otherwise).
#include <cstring>
#include <string_view>

#include "strata/backends/cpu/strided.h"
#include "strata/core/dtype_dispatch.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

inline void copy(std::string_view backend, const ops::CopyArgs& a) {
  STRATA_CHECK(a.x.device.is_cpu() && a.y.device.is_cpu(), backend, ": copy from ", a.x.device.str(), " to ",
               a.y.device.str(), " needs a GPU backend; ", backend, " copies between CPU tensors only");
  if (a.x.numel() == 0) return;  // empty tensors have null data: memmove(nullptr, ...) is undefined
  if (a.x.dtype == a.y.dtype && is_dense(a.x) && same_layout(a.x, a.y)) {
    std::memmove(a.y.data, a.x.data, static_cast<size_t>(a.x.numel()) * dtype_size(a.x.dtype));
    return;
  }
  visit_dtype(a.x.dtype, [&](auto s) {
    using S = decltype(s);
    visit_dtype(a.y.dtype, [&](auto d) {
      using D = decltype(d);
      const S* x = a.x.ptr<const S>();
      D* y = a.y.ptr<D>();
      for_each_unordered([x, y](int64_t, int64_t ox, int64_t oy) { y[oy] = convert_element<D>(x[ox]); }, a.x, a.y);
    });
  });
}

}  // namespace strata::backends::loops
