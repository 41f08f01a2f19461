#include "strata/ops/table/tensor_view.h"

#include "strata/core/tensor.h"

namespace strata::ops {

TensorView::TensorView(const Tensor& t) {
  if (!t.defined()) return;
  data = t.data_ptr();
  sizes = t.sizes();
  strides = t.strides();
  dtype = t.dtype();
  device = t.device();
  defined = true;
}

bool TensorView::is_contiguous() const { return is_contiguous_layout(sizes, strides); }
bool TensorView::is_channels_last() const { return is_channels_last_layout(sizes, strides); }

}  // namespace strata::ops
