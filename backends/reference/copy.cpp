// copy: any dtype to any dtype, any strides to any strides, between CPU tensors.
// Cross-device copies belong to the backend of the non-CPU device. space_to_depth,
// written from its definition (op_args.h), element by element, in the tensors' dtype.
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

namespace {
// Each (n, k, i, j) of the block tensor and the image element it holds, or h = -1 when
// it holds a zero (a padding pixel or a channel past block * block * C).
template <class Fn>
void for_each_block_position(const TensorView& im, const TensorView& bt, const SpaceToDepthParams& p, Fn&& fn) {
  const int64_t c_count = im.sizes[1];
  for (int64_t n = 0; n < bt.sizes[0]; ++n)
    for (int64_t k = 0; k < bt.sizes[1]; ++k)
      for (int64_t i = 0; i < bt.sizes[2]; ++i)
        for (int64_t j = 0; j < bt.sizes[3]; ++j) {
          const int64_t slot = k / c_count, c = k % c_count;
          const int64_t h = i * p.block + slot / p.block - p.pad_h, w = j * p.block + slot % p.block - p.pad_w;
          const bool inside = slot < int64_t{p.block} * p.block && h >= 0 && h < im.sizes[2] && w >= 0 &&
                              w < im.sizes[3];
          const int64_t at_bt = n * bt.strides[0] + k * bt.strides[1] + i * bt.strides[2] + j * bt.strides[3];
          const int64_t at_im = inside ? n * im.strides[0] + c * im.strides[1] + h * im.strides[2] + w * im.strides[3]
                                       : int64_t{-1};
          fn(at_bt, at_im);
        }
}
}  // namespace

void ReferenceBackend::space_to_depth_fwd(const SpaceToDepthArgs& a) {
  visit_dtype(a.x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<T>();
    T* y = a.y.ptr<T>();
    const T zero = static_cast<T>(0.0);
    for_each_block_position(a.x, a.y, a.p, [&](int64_t at_y, int64_t at_x) { y[at_y] = at_x < 0 ? zero : x[at_x]; });
  });
}

// The adjoint: dx is zero, then each block position that holds an element of x passes
// its gradient back.
void ReferenceBackend::space_to_depth_bwd(const SpaceToDepthBwdArgs& a) {
  visit_dtype(a.dx.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = a.dy.ptr<T>();
    T* dx = a.dx.ptr<T>();
    const T zero = static_cast<T>(0.0);
    for_each_element([&](int64_t, int64_t o) { dx[o] = zero; }, a.dx);
    for_each_block_position(a.dx, a.dy, a.p, [&](int64_t at_dy, int64_t at_dx) {
      if (at_dx >= 0) dx[at_dx] = dy[at_dy];
    });
  });
}

}  // namespace strata::backends
