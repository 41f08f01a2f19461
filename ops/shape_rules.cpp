#include "strata/ops/shape_rules.h"

#include <limits>

#include "strata/ops/checks.h"

namespace strata::ops {

namespace {
// Output extent of a sliding window; 0 when the window does not fit (C++ division
// truncates toward zero, so a negative span must be caught before dividing). In 128
// bits: padding or dilation near INT_MAX would overflow int64 arithmetic; an extent
// past int64 saturates, and the output allocation then reports the size.
int64_t window_out(int64_t in, int64_t k, int pad, int stride, int dil) {
  const __int128 span = __int128{in} + 2 * __int128{pad} - __int128{dil} * (__int128{k} - 1) - 1;
  if (span < 0) return 0;
  const __int128 out = span / stride + 1;
  return out > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(out);
}
}  // namespace

Shape conv2d_out_shape(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  constexpr std::string_view op = "conv2d";
  check_rank(op, "input", x, 4);
  check_rank(op, "weight", w, 4);
  check_float(op, "input", x);
  check_same_dtype(op, "input", x, "weight", w);
  STRATA_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 && p.dilation_w > 0 && p.pad_h >= 0 &&
                   p.pad_w >= 0 && p.groups > 0,
               "conv2d: stride and dilation must be positive, padding non-negative, groups positive (stride ",
               p.stride_h, "x", p.stride_w, ", padding ", p.pad_h, "x", p.pad_w, ", dilation ", p.dilation_h, "x",
               p.dilation_w, ", groups ", p.groups, ")");
  const int64_t c = x.size(1), k = w.size(0);
  STRATA_CHECK(c > 0 && k > 0, "conv2d: input has ", c, " channels and weight ", k,
               " output channels; both must be positive (input ", x.sizes().str(), ", weight ", w.sizes().str(), ")");
  STRATA_CHECK(c % p.groups == 0 && k % p.groups == 0, "conv2d: groups=", p.groups,
               " must divide input channels ", c, " and output channels ", k, " (input ", x.sizes().str(),
               ", weight ", w.sizes().str(), ")");
  STRATA_CHECK(w.size(1) * p.groups == c, "conv2d: input has ", c, " channels but weight expects ",
               w.size(1) * p.groups, " (input ", x.sizes().str(), ", weight ", w.sizes().str(), ", groups ",
               p.groups, ")");
  if (b.defined()) check_vector(op, "bias", b, k, w);
  const int64_t ho = window_out(x.size(2), w.size(2), p.pad_h, p.stride_h, p.dilation_h);
  const int64_t wo = window_out(x.size(3), w.size(3), p.pad_w, p.stride_w, p.dilation_w);
  STRATA_CHECK(ho > 0 && wo > 0 && x.size(0) > 0, "conv2d: output would be empty: input ", x.sizes().str(),
               ", weight ", w.sizes().str(), ", padding ", p.pad_h, "x", p.pad_w, ", dilation ", p.dilation_h, "x",
               p.dilation_w);
  const Shape out{x.size(0), k, ho, wo};
  // 8 bytes per element at most: an output whose byte count cannot be represented.
  const int64_t n = out.checked_numel();
  STRATA_CHECK(n >= 0 && n <= std::numeric_limits<int64_t>::max() / 8, "conv2d: output [", x.size(0), ",", k, ",",
               ho, ",", wo, "] is too large: input ", x.sizes().str(), ", weight ", w.sizes().str(), ", padding ",
               p.pad_h, "x", p.pad_w, ", stride ", p.stride_h, "x", p.stride_w);
  return out;
}

DType batch_norm_param_dtype(const Tensor& x) {
  return x.dtype() == DType::f16 || x.dtype() == DType::bf16 ? DType::f32 : x.dtype();
}

void check_batch_norm_param(std::string_view op, std::string_view arg, const Tensor& t, const Tensor& x) {
  check_defined(op, arg, t);
  const int64_t c = x.size(1);
  STRATA_CHECK(t.dim() == 1 && t.size(0) == c, op, ": ", arg, " must be [", c, "] to match ", x.str(), ", got ",
               t.str());
  const DType want = batch_norm_param_dtype(x);
  STRATA_CHECK(t.dtype() == want, op, ": ", arg, " must have dtype ", dtype_name(want), " for input ", x.str(),
               want != x.dtype() ? " (statistics and parameters stay f32 under mixed precision)" : "", ", got ",
               t.str());
}

int64_t batch_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var) {
  constexpr std::string_view op = "batch_norm";
  check_float(op, "input", x);
  STRATA_CHECK(x.dim() == 2 || x.dim() == 4, "batch_norm: input must be [N,C] or [N,C,H,W], got ", x.str());
  check_batch_norm_param(op, "weight", gamma, x);
  check_batch_norm_param(op, "bias", beta, x);
  check_batch_norm_param(op, "running_mean", running_mean, x);
  check_batch_norm_param(op, "running_var", running_var, x);
  const int64_t c = x.size(1);
  STRATA_CHECK(x.numel() > 0, "batch_norm: empty input ", x.str());
  return c;
}

Shape pool2d_out_shape(std::string_view op, const Tensor& x, const Pool2dParams& p) {
  check_rank(op, "input", x, 4);
  check_float(op, "input", x);
  STRATA_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0, op,
               ": kernel and stride must be positive (kernel ", p.kernel_h, "x", p.kernel_w, ", stride ",
               p.stride_h, "x", p.stride_w, ")");
  STRATA_CHECK(p.pad_h >= 0 && p.pad_w >= 0 && 2 * int64_t{p.pad_h} <= p.kernel_h &&
                   2 * int64_t{p.pad_w} <= p.kernel_w,
               op, ": padding ", p.pad_h, "x", p.pad_w, " must be at most half the kernel ", p.kernel_h, "x",
               p.kernel_w);
  const int64_t ho = window_out(x.size(2), p.kernel_h, p.pad_h, p.stride_h, 1);
  const int64_t wo = window_out(x.size(3), p.kernel_w, p.pad_w, p.stride_w, 1);
  STRATA_CHECK(ho > 0 && wo > 0 && x.size(0) > 0 && x.size(1) > 0, op, ": output would be empty for input ",
               x.sizes().str(), " and kernel ", p.kernel_h, "x", p.kernel_w);
  return Shape{x.size(0), x.size(1), ho, wo};
}

Shape global_avg_pool_out_shape(const Tensor& x) {
  check_rank("global_avg_pool", "input", x, 4);
  check_float("global_avg_pool", "input", x);
  STRATA_CHECK(x.numel() > 0, "global_avg_pool: empty input ", x.str());
  return Shape{x.size(0), x.size(1)};
}

SpaceToDepthParams space_to_depth_params(std::string_view op, const Tensor& x, const SpaceToDepthParams& p) {
  check_rank(op, "input", x, 4);
  STRATA_CHECK(x.numel() > 0, op, ": empty input ", x.str());
  // Blocks past 64 x 64 pixels or padding past a block's rows are no stem's; the bounds
  // keep every index below in int64.
  STRATA_CHECK(p.block >= 1 && p.block <= 64 && p.pad_h >= 0 && p.pad_w >= 0 && p.pad_h < p.block * 64 &&
                   p.pad_w < p.block * 64,
               op, ": block must be in [1, 64] and padding in [0, 64 * block) (block ", p.block, ", padding ",
               p.pad_h, "x", p.pad_w, ")");
  const int64_t b = p.block, least = b * b * x.size(1);
  SpaceToDepthParams r = p;
  if (r.channels == 0) r.channels = least;
  if (r.out_h == 0) r.out_h = (x.size(2) + p.pad_h + b - 1) / b;
  if (r.out_w == 0) r.out_w = (x.size(3) + p.pad_w + b - 1) / b;
  STRATA_CHECK(r.channels >= least, op, ": output channels ", r.channels, " must be at least block * block * C = ",
               least, " for input ", x.sizes().str(), " and block ", b);
  STRATA_CHECK(r.out_h > 0 && r.out_w > 0, op, ": output height and width must be positive, got ", r.out_h, "x",
               r.out_w);
  return r;
}

Shape linear_out_shape(const Tensor& x, const Tensor& w, const Tensor& b) {
  constexpr std::string_view op = "linear";
  check_rank(op, "input", x, 2);
  check_rank(op, "weight", w, 2);
  check_float(op, "input", x);
  check_same_dtype(op, "input", x, "weight", w);
  STRATA_CHECK(x.size(1) == w.size(1), "linear: input has ", x.size(1), " features but weight expects ", w.size(1),
               " (input ", x.sizes().str(), ", weight ", w.sizes().str(), ")");
  // Empty matrices crash oneDNN 2.6's matmul (SIGFPE while planning), and an empty
  // batch or layer is a caller's mistake everywhere else in strata (conv2d, pooling).
  STRATA_CHECK(x.size(0) > 0 && x.size(1) > 0 && w.size(0) > 0, "linear: empty input or weight (input ",
               x.sizes().str(), ", weight ", w.sizes().str(), "): batch, features and output features must be positive");
  if (b.defined()) check_vector(op, "bias", b, w.size(0), w);
  return Shape{x.size(0), w.size(0)};
}

void check_softmax_xent(const Tensor& logits, const Tensor& labels) {
  constexpr std::string_view op = "softmax_xent";
  check_rank(op, "logits", logits, 2);
  check_float(op, "logits", logits);
  check_rank(op, "labels", labels, 1);
  check_dtype(op, "labels", labels, DType::i64);
  STRATA_CHECK(logits.size(1) > 0, "softmax_xent: logits ", logits.str(), " have 0 classes");
  STRATA_CHECK(labels.size(0) == logits.size(0) && logits.size(0) > 0, "softmax_xent: ", labels.size(0),
               " labels for a batch of ", logits.size(0), " (logits ", logits.str(), ", labels ",
               labels.str(), ")");
}

void check_bce_logits(const Tensor& logits, const Tensor& targets) {
  constexpr std::string_view op = "bce_logits";
  check_float(op, "logits", logits);
  check_float(op, "targets", targets);
  check_same_shape(op, "logits", logits, "targets", targets);
  check_same_dtype(op, "logits", logits, "targets", targets);
  STRATA_CHECK(logits.numel() > 0, "bce_logits: empty logits ", logits.str());
}

}  // namespace strata::ops
