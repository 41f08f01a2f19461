#pragma once
// Printing a tensor's values, as PyTorch's repr does:
//
//   std::cout << randn({2, 3}) << "\n";
//   tensor([[-1.2646,  0.5763,  0.1425],
//           [ 0.3071, -0.4460,  1.0331]], shape=[2,3], dtype=f32, device=cpu)
//
// Values follow torch's formatter: a fixed 4-decimal format, or scientific notation
// when the largest and smallest nonzero magnitudes are more than 1000 apart, the
// largest exceeds 1e8 or the smallest is below 1e-4; floating tensors holding only
// integers print as "1.", integer tensors as integers; all right-aligned to one width;
// rows wrap at 80 columns. A tensor of more than 1000 elements is summarised: each
// dimension longer than 6 shows its first and last 3 entries around "...".
// Tensors on a device are copied to the host for printing.
//
// Tensor::str() stays the one-line summary ("f32[2,3] on cpu") that error messages
// use; to_string(t) is the full printout.
#include <cstdint>
#include <iosfwd>
#include <string>

#include "strata/core/tensor.h"

namespace strata {

// torch.set_printoptions' knobs, per call.
struct PrintOptions {
  int precision = 4;         // digits after the decimal point
  int64_t threshold = 1000;  // more elements than this are summarised
  int64_t edgeitems = 3;     // entries shown at each end of a summarised dimension
  int linewidth = 80;        // columns before a row wraps
};

std::string to_string(const Tensor& t, const PrintOptions& o = {});
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace strata
