#pragma once
// Argument structs of the op table (op_table.def), one per row. Every backend
// function has the signature `void name(const Args&)`. Views are filled and
// shape-checked by the front end (ops/) or a direct-mode plan before any backend
// runs; backends may assume the shape rules hold.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "strata/ops/table/channel_sum.h"
#include "strata/ops/table/pointwise.h"
#include "strata/ops/table/tensor_view.h"

#if defined(__CUDACC__)
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

namespace strata::ops {

struct Conv2dParams {
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  // An algorithm permission, as ATen's ConvParams carries allow_tf32: a forward with
  // versioned weights (Conv2dFwdArgs::w_version, evaluation) may compute a 3x3 stride-1
  // convolution by a Winograd transform where the backend has one (fewer multiplies,
  // larger rounding: Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
  // 2016). Other calls ignore it.
  bool winograd = false;
};

struct Conv2dFwdArgs {
  TensorView x, w, b, y;  // b optional
  Conv2dParams p;
  // Epilogue (inference only): y = relu?(conv(x, w) + b + z), the residual add and ReLU
  // that follow a convolution (a ResNet block's with its batch norm folded into w and b)
  // in the convolution's own call. No backward follows it.
  TensorView z{};  // optional, y's sizes and dtype
  bool relu = false;
  // Optional: w's contents are those a backend saw with the same w.data as long as
  // *w_version is the same too (nn::Conv2d's folded weights: an id that changes at each
  // fold, never reused); a backend may then keep w in its own layout between calls
  // instead of re-laying it out at each one.
  const uint64_t* w_version = nullptr;
};
struct Conv2dBwdDataArgs {
  TensorView dy, w, dx;
  Conv2dParams p;
};
struct Conv2dBwdWeightArgs {
  TensorView x, dy, dw;
  Conv2dParams p;
};
struct Conv2dBwdBiasArgs {
  TensorView dy, db;  // db[k] = sum over n,h,w of dy[n,k,h,w]
};

struct BatchNormFwdArgs {
  TensorView x, gamma, beta, running_mean, running_var, y, save_mean, save_invstd;
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1-momentum)*running + momentum*batch (unbiased var)
  bool training = true;
  // Fusion: y = relu?(bn(x) + z), the residual add and ReLU that follow a ResNet block's
  // batch norms, in the batch norm's own pass over memory, each step rounded to x's dtype
  // as the separate ops round it. Fused evaluation with gradients off saves nothing
  // (save_mean and save_invstd undefined, not written). Fused training saves the
  // statistics and, in relu_mask, which outputs the ReLU passed (relu_mask.h).
  TensorView z{};  // optional, x's sizes and dtype
  bool relu = false;
  TensorView relu_mask{};  // optional u8 output [relu_mask_bytes(x)], needs relu
  // Synchronised batch norm (PyTorch's SyncBatchNorm; training only, null otherwise): the
  // batch statistics are those of the rows of every replica in `sync`'s group. The backend
  // computes its rows' per-channel sums as f64 [2C+1] = {sum x [C], sum x^2 [C], rows per
  // channel M}, has `sync` sum them over the replicas (channel_sum.h) and normalises with
  // mean = S/N and the biased variance Q/N - mean^2 (N the summed M); the running variance
  // takes the unbiased N/(N-1) of it. Any M >= 1 here: N >= 2 over two replicas or more.
  ChannelSumReducer* sync = nullptr;
};
struct BatchNormBwdArgs {
  TensorView x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta;
  bool training = true;  // false: statistics were constants (eval mode)
  // The backward of a fused forward: relu_mask (the forward's) keeps dy where the ReLU
  // passed and zeroes it elsewhere before the batch norm's backward; dz, when given,
  // receives that masked dy, the gradient of the forward's residual input z.
  TensorView relu_mask{};  // optional u8 input
  TensorView dz{};         // optional output with relu_mask, x's sizes, dtype and strides
  // The backward of a synchronised forward (training only; save_mean and save_invstd are the
  // group's statistics): the per-channel f64 [2C+1] = {sum dy [C], sum dy*(x - mean) [C], M}
  // of this replica's rows (dy masked first) summed over the group give dx, the gradient of
  // the group's batch norm: gamma*invstd*(dy - Sdy/N - (x - mean)*invstd^2*Sdyx/N). dgamma
  // and dbeta stay this replica's own sums, as in PyTorch: data-parallel training averages
  // them with the other gradients.
  ChannelSumReducer* sync = nullptr;
};

struct ReluFwdArgs {
  TensorView x, y;
};
struct ReluBwdArgs {
  TensorView y, dy, dx;  // y is the forward output: dx = dy where y > 0
};

struct Pool2dParams {
  int kernel_h = 2, kernel_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;
  bool count_include_pad = true;  // avg pool only; PyTorch's default
};
struct MaxPool2dFwdArgs {
  TensorView x, y;
  Pool2dParams p;
};
// The gradient goes to the first maximum of each window in row-major order.
struct MaxPool2dBwdArgs {
  TensorView x, y, dy, dx;
  Pool2dParams p;
};
struct AvgPool2dFwdArgs {
  TensorView x, y;
  Pool2dParams p;
};
struct AvgPool2dBwdArgs {
  TensorView dy, dx;
  Pool2dParams p;
};
struct GlobalAvgPoolFwdArgs {
  TensorView x, y;  // x [N,C,H,W] -> y [N,C]
};
struct GlobalAvgPoolBwdArgs {
  TensorView dy, dx;
};

// With act (a parameterless pointwise.def formula), y = act(x w^T + b) and pre = x w^T + b, the
// input the backward's derivative reads: the activation as the GEMM's epilogue where the backend
// has one (cuBLASLt's GELU), else the product into pre, then the formula. With z (a residual of y's
// shape; not with act), y = x w^T + b + z: z read by the GEMM (cuBLASLt's C) where the backend can,
// else added after it.
// With norm_eps (inference; not with z): x's rows layer-normalised first, as layer_norm_fwd
// normalises them (norm_w, norm_b optional; each row rounded to x's dtype), so y = act?(LN(x) w^T
// + b): the few-rows kernel normalises a row as it reads it, where a decoding step ran a layer
// norm kernel before each product; elsewhere layer_norm_fwd into normed (its statistics into
// norm_mean and norm_rstd, the front end's scratch), then the product.
struct LinearFwdArgs {
  TensorView x, w, b, y;  // b optional
  std::optional<UnaryFn> act = std::nullopt;
  TensorView pre = {};  // with act only
  TensorView z = {};
  TensorView norm_w = {}, norm_b = {}, normed = {}, norm_mean = {}, norm_rstd = {};
  std::optional<double> norm_eps = std::nullopt;
};
// With act, the linear's input was act(pre) (post, which the formula may read): dx is the
// gradient at pre, act'(pre) * (dy w), the derivative in the GEMM's epilogue where the backend
// has one (cuBLASLt's DGELU).
struct LinearBwdDataArgs {
  TensorView dy, w, dx;
  std::optional<UnaryFn> act = std::nullopt;
  TensorView pre = {}, post = {};  // with act only
};
struct LinearBwdWeightArgs {
  TensorView x, dy, dw, db;  // db optional
};

struct AddArgs {
  TensorView a, b, y;
};
struct ScaleArgs {
  TensorView x, y;
  double alpha = 1.0;
};
struct AxpyArgs {
  TensorView x, y;
  double alpha = 1.0;
};

// The element-wise formulas of pointwise.def, one op for each family: y = f(x) (fn, with
// the formula's scalar parameters p0, p1), y = f(a, b); views of one shape, any strides.
// The backward reads whichever of x and y its formula names (both are given).
struct UnaryFwdArgs {
  TensorView x, y;
  UnaryFn fn = UnaryFn::neg;
  double p0 = 0.0, p1 = 0.0;
};
struct UnaryBwdArgs {
  TensorView x, y, dy, dx;
  UnaryFn fn = UnaryFn::neg;
  double p0 = 0.0, p1 = 0.0;
};
struct BinaryFwdArgs {
  TensorView a, b, y;
  BinaryFn fn = BinaryFn::mul;
};
struct BinaryBwdArgs {
  TensorView a, b, y, dy, da, db;  // da, db optional: the gradients asked for
  BinaryFn fn = BinaryFn::mul;
};

// y = a <op> b as u8 (1 true, 0 false), a and b of one shape and dtype (float or integer).
struct CompareArgs {
  TensorView a, b, y;
  CompareFn fn = CompareFn::eq;
};
// y = cond ? a : b, cond u8 (nonzero true); every view of y's sizes (broadcast ones with stride 0).
struct WhereArgs {
  TensorView cond, a, b, y;
};

struct DropoutFwdArgs {
  TensorView x, y, mask;  // mask: u8, 1 = kept
  double p = 0.5;
  uint64_t seed = 0, offset = 0;
  // Optional i64 {seed, offset} (their bits) on the backend's device: when given, read
  // when the kernel runs and replaces seed and offset, so that a captured graph draws a
  // new mask at every launch (graph mode writes it before each one).
  TensorView rng{};
};
struct DropoutBwdArgs {
  TensorView dy, mask, dx;
  double p = 0.5;
};

// Softmax cross-entropy over logits [N, C] with labels i64 [N], the mean over the rows whose label is not
// ignore_index (PyTorch's F.cross_entropy): loss = sum_kept (lse_n - x_n[label_n]) / #kept, rank 0 in the statistics
// dtype (ops::stats_dtype: f32 for f16/bf16 logits); every row ignored is 0/0, NaN, as PyTorch 2.x returns. A label is ignore_index or in [0, C); any other is an
// error (xent_labels.h). The forward saves only lse_n = logsumexp(x_n), [N] in the statistics dtype (ops::stats_dtype),
// for every row: the backward reads the logits again instead of a saved [N, C] softmax (for a language model's
// vocabulary a second copy of the logits). logits and dlogits may have any strides: GPT's are the first C columns of
// rows padded to an aligned length (nn::GptConfig::vocab_multiple), classes past C never entering, and a backend
// writes dlogits' own elements only, none of a padding beside them. The backward writes, in one pass,
//   dlogits_n = (exp(x_n - lse_n) - onehot(label_n)) * dloss / #kept, and 0 on ignored rows.
inline constexpr int64_t kDefaultIgnoreIndex = -100;  // PyTorch's default
struct SoftmaxXentFwdArgs {
  TensorView logits, labels, loss, lse;
  int64_t ignore_index = kDefaultIgnoreIndex;
};
struct SoftmaxXentBwdArgs {
  TensorView logits, lse, labels, dloss, dlogits;
  int64_t ignore_index = kDefaultIgnoreIndex;
};
struct BceLogitsFwdArgs {
  TensorView logits, targets, loss;  // targets same shape and dtype as logits
};
struct BceLogitsBwdArgs {
  TensorView logits, targets, dloss, dlogits;
};

struct ReduceArgs {
  TensorView x, y;  // y rank 0
};
struct ArgmaxArgs {
  TensorView x, y;  // x [N,C] -> y i64 [N]; first maximum wins
};
// Reductions over the dims where y has size 1 and x does not (y has x's rank; the front end
// views the result without them unless keepdim). NaN propagates through max and min and
// counts as the greatest for argmax/argmin (PyTorch's rule). argmax/argmin write i64: the
// first extreme's position in row-major order over the reduced dims; the others y in x's
// dtype, accumulated in float (f32/f16/bf16) or double (f64).
enum class ReduceFn : uint8_t { sum, mean, max, min, argmax, argmin };
struct ReduceDimsArgs {
  TensorView x, y;
  ReduceFn fn = ReduceFn::sum;
};
// y = softmax(x) along dim (log: log_softmax), computed stably (the row's maximum subtracted
// first); any strides. bwd: dx = y (dy - sum(dy y)), log: dx = dy - exp(y) sum(dy).
struct SoftmaxArgs {
  TensorView x, y;
  int dim = -1;  // 0 <= dim < x.dim()
  bool log = false;
};
struct SoftmaxBwdArgs {
  TensorView y, dy, dx;
  int dim = -1;
  bool log = false;
};
// Layer normalisation (Ba, Kiros and Hinton, "Layer Normalization", 2016) of the rows of
// x [N, C] (any strides): y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps)
// with the biased variance. mean and rstd [N] are in the statistics dtype (f32 for f32, f16
// and bf16 inputs, f64 for f64), written for the backward. weight and bias [C] are optional
// (absent: 1 and 0); the bwd row writes dx, dweight and dbias where each is given
// (dweight, dbias: sums over the rows).
struct LayerNormFwdArgs {
  TensorView x, weight, bias, y, mean, rstd;
  double eps = 1e-5;
};
struct LayerNormBwdArgs {
  TensorView x, weight, mean, rstd, dy, dx, dweight, dbias;
};
// Scaled dot-product attention (Vaswani et al., "Attention Is All You Need", 2017):
// q [B, H, Tq, D], k and v [B, H, Tk, D], y [B, H, Tq, D], each of any strides;
//   y_i = sum_j softmax_j(scale q_i . k_j) v_j
// over every key j, or, when causal, over j <= i + Tk - Tq: the queries are the last Tq of
// the Tk positions (a decoding step's queries see the cached keys; Tq == Tk is the usual
// lower-triangular mask). kv_len (optional, i64 [1] on the op's device): only k's and v's
// first L = kv_len rows are keys (a preallocated cache filled up to L), the causal rule then
// reading L for Tk; the kernels read L from memory, so a captured step replays over a
// cache that grows, and clamp it to [0, Tk]. lse [B, H, Tq] (statistics dtype, as layer norm's) is
// log sum_j exp(scale q_i . k_j), written for the backward, which recomputes the
// probabilities from it instead of keeping the [Tq, Tk] matrix. delta [B, H, Tq] is the
// backward's scratch (sum_d dy * y per query).
// k_new, v_new [B, H, Tq, D] and positions (optional, all three or none; i64 [Tq] on the op's
// device): a decoding step's own keys and values, written into k's and v's rows `positions`
// before the queries attend (FlashAttention's kv-cache interface appends them so: Dao,
// "FlashAttention-2", 2023), where an index_add per cache ran before; forward only. The front end
// checks host positions; on the device a row whose position lies outside [0, Tk) is not written
// (nn::KvCache checks its positions as it writes them).
struct AttentionFwdArgs {
  TensorView q, k, v, y, lse, kv_len;
  double scale = 1.0;
  bool causal = true;
  TensorView k_new = {}, v_new = {}, positions = {};
};
struct AttentionBwdArgs {
  TensorView q, k, v, y, lse, dy, delta, dq, dk, dv, kv_len;
  double scale = 1.0;
  bool causal = true;
};
// y[i] = alpha a[i] b[i] for i < B: a [B, M, K], b [B, K, N], y [B, M, N]. Each matrix of a
// and b has unit stride along one of its two dims (row- or column-major, any leading
// dimension) and any batch stride (0: one matrix for every batch); y is dense row-major.
// The front end makes a copy of an operand that is neither.
struct BmmArgs {
  TensorView a, b, y;
  double alpha = 1.0;
};
// index_select: y = x with dim `dim` replaced by x's rows index[0..n): y[.., i, ..] = x[.., index[i], ..].
// index_add: y[.., index[i], ..] += x[.., i, ..] (accumulates; in index order, deterministic).
// index i64 [n], every entry in [0, size of the indexed dim) (the front end checks host
// indices; a GPU backend must not read or write outside the tensor for a bad one).
struct IndexSelectArgs {
  TensorView x, index, y;
  int dim = 0;
};
struct IndexAddArgs {
  TensorView x, index, y;
  int dim = 0;
};

// space_to_depth (a pixel unshuffle with padding): x [N, C, H, W] read as blocks of
// block x block pixels of x padded by pad_h above and pad_w left (zeros outside x):
//   y[n, (dy * block + dx) * C + c, i, j] = x[n, c, i * block + dy - pad_h, j * block + dx - pad_w]
// y [N, channels, out_h, out_w]: channels >= block * block * C (the ones past that are
// zero), any out_h, out_w >= 1; 0 for each means the least that holds every pixel of x
// (block * block * C, ceil((H + pad_h) / block), ceil((W + pad_w) / block)). A
// stride-`block` convolution of x is a stride-1 convolution of y with a rearranged weight
// (nn::Conv2d's space-to-depth form). The bwd row is its adjoint, dx[n, c, h, w] = dy at
// x's element's position, zero where no position holds it.
struct SpaceToDepthParams {
  int block = 2, pad_h = 0, pad_w = 0;
  int64_t channels = 0, out_h = 0, out_w = 0;
};
struct SpaceToDepthArgs {
  TensorView x, y;
  SpaceToDepthParams p;  // with y's sizes filled in
};
struct SpaceToDepthBwdArgs {
  TensorView dy, dx;
  SpaceToDepthParams p;
};

struct FillArgs {
  TensorView y;
  double value = 0.0;
};
struct CopyArgs {
  TensorView x, y;
};

// codegen:begin cuda_train_ops
struct SgdOptions {
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0;
  bool nesterov = false;
};
// codegen:end
// Graph mode reads the learning rate and step count from memory written before each
// launch, so that a captured step follows a schedule: the optional `hyper` is f64 {lr,
// step} and, when given, replaces o.lr (and step). On the parameter's device, or in host
// memory: a GPU backend then copies it in the call (from pinned memory only; a captured
// copy reads what the memory holds at each launch of the graph).
// Dynamic loss scaling on the device: the optional `amp` is AmpUpdateScaleArgs's state
// of this step (after amp_update_scale ran): the gradient is read times amp[3] (1/scale),
// and nothing is written when amp[3] is 0 (a gradient was not finite: the step is skipped).
struct SgdStepArgs {
  TensorView param, grad, momentum_buf;  // momentum_buf needed when momentum != 0
  SgdOptions o{};
  TensorView hyper{};  // optional f64 {lr, step}, see above
  TensorView amp{};    // optional f64 [4], see above
};
struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
};
// With `amp`, bias correction counts step - amp[2] (the skipped steps): the optimizer
// passes each parameter's attempted steps plus the skips before its first.
struct AdamStepArgs {
  TensorView param, grad, exp_avg, exp_avg_sq;
  AdamOptions o{};
  int64_t step = 1;    // 1-based, for bias correction
  TensorView hyper{};  // optional f64 {lr, step}, see SgdStepArgs
  TensorView amp{};    // optional f64 [4], see SgdStepArgs
};

// A parameter group's steps in one call (PyTorch's fused and foreach optimizers take a
// group's lists alike): parameter i is stepped exactly as sgd_step / adam_step step it
// with the i-th entries of the lists, and a backend may run the whole list as one kernel
// (the cuda backend's multi-tensor kernels; the CPU backends loop over their single step).
// Lists of equal length; momentum_bufs empty without momentum; hypers empty or one f64
// {lr, step} per parameter (graph mode, see SgdStepArgs); steps: Adam's per parameter.
struct MultiSgdStepArgs {
  std::span<const TensorView> params, grads, momentum_bufs, hypers;
  SgdOptions o{};
  TensorView amp{};  // optional, see SgdStepArgs
};
struct MultiAdamStepArgs {
  std::span<const TensorView> params, grads, exp_avgs, exp_avg_sqs, hypers;
  std::span<const int64_t> steps;
  AdamOptions o{};
  TensorView amp{};  // optional, see SgdStepArgs
};
// The i-th parameter's single step of a list.
inline SgdStepArgs step_of(const MultiSgdStepArgs& a, size_t i) {
  return SgdStepArgs{a.params[i], a.grads[i], a.momentum_bufs.empty() ? TensorView() : a.momentum_bufs[i], a.o,
                     a.hypers.empty() ? TensorView() : a.hypers[i], a.amp};
}
inline AdamStepArgs step_of(const MultiAdamStepArgs& a, size_t i) {
  return AdamStepArgs{a.params[i], a.grads[i], a.exp_avgs[i], a.exp_avg_sqs[i], a.o, a.steps[i],
                      a.hypers.empty() ? TensorView() : a.hypers[i], a.amp};
}

// Dynamic loss scaling on the device (direct and graph modes; GradScaler's rule).
// state: f64 {scale, finite steps in a row, skipped steps, 1/scale or 0}. The kernel
// reads scale and each gradient's sum; when a sum is not finite it writes state[3] = 0
// (the optimizer's steps then skip), counts the skip and multiplies the scale by
// backoff; otherwise state[3] = 1/scale, and after `interval` finite steps in a row the
// scale is multiplied by growth.
struct AmpUpdateScaleArgs {
  TensorView grad_sums, state;  // grad_sums: [P], floating; state: f64 [4]
  double growth = 2.0, backoff = 0.5;
  int64_t interval = 2000;
};
// codegen:begin cuda_train_ops
enum AmpState : int { kAmpScale = 0, kAmpGood = 1, kAmpSkipped = 2, kAmpInvScale = 3 };
// codegen:end

// The update itself, for every backend (state in the backend's memory, any stride, read
// and written by one thread); `sum_of` reads the i-th gradient sum as a double.
template <class SumOf>
STRATA_HOST_DEVICE inline void amp_update_scale_state(double* st, int64_t stride, int64_t count, SumOf sum_of,
                                                      double growth, double backoff, int64_t interval) {
  double state[4];
  for (int k = 0; k < 4; ++k) state[k] = st[k * stride];
  bool finite = true;
  for (int64_t i = 0; i < count; ++i) {
    const double s = sum_of(i);
    finite = finite && s - s == 0.0;  // false for inf and NaN
  }
  if (!finite) {
    state[kAmpInvScale] = 0.0;
    state[kAmpScale] *= backoff;
    state[kAmpGood] = 0.0;
    state[kAmpSkipped] += 1.0;
  } else {
    state[kAmpInvScale] = 1.0 / state[kAmpScale];
    state[kAmpGood] += 1.0;
    if (state[kAmpGood] >= static_cast<double>(interval)) {
      state[kAmpScale] *= growth;
      state[kAmpGood] = 0.0;
    }
  }
  for (int k = 0; k < 4; ++k) st[k * stride] = state[k];
}

// CPU backends (hyper in host memory): the arguments with hyper's values in place.
inline SgdStepArgs with_hyper_read(SgdStepArgs a) {
  if (a.hyper.defined) a.o.lr = a.hyper.ptr<const double>()[0];
  return a;
}
inline AdamStepArgs with_hyper_read(AdamStepArgs a) {
  if (a.hyper.defined) {
    a.o.lr = a.hyper.ptr<const double>()[0];
    a.step = static_cast<int64_t>(a.hyper.ptr<const double>()[1]);
  }
  if (a.amp.defined) a.step -= static_cast<int64_t>(a.amp.ptr<const double>()[kAmpSkipped]);
  return a;
}
// CPU backends, dynamic loss scaling: whether the step is skipped, and the factor its
// gradient is read with (1 without `amp`).
inline bool amp_skips(const TensorView& amp) { return amp.defined && amp.ptr<const double>()[kAmpInvScale] == 0.0; }
inline double amp_grad_factor(const TensorView& amp) {
  return amp.defined ? amp.ptr<const double>()[kAmpInvScale] : 1.0;
}

// CPU backends (rng in host memory): the arguments with rng's values in place.
inline DropoutFwdArgs with_rng_read(DropoutFwdArgs a) {
  if (a.rng.defined) {
    a.seed = static_cast<uint64_t>(a.rng.ptr<const int64_t>()[0]);
    a.offset = static_cast<uint64_t>(a.rng.ptr<const int64_t>()[1]);
  }
  return a;
}

// Dropout's random numbers: a counter-based hash (splitmix64) of (seed, offset+i),
// so every backend draws the same mask for the same seed. The code between "codegen:begin"
// and "codegen:end" is also written, as it is, into the training steps codegen/ generates,
// so that they draw strata's masks.
// codegen:begin dropout_rng
STRATA_HOST_DEVICE inline uint64_t dropout_hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
STRATA_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t i, double p) {
  const double u = static_cast<double>(dropout_hash(seed, i) >> 11) * (1.0 / 9007199254740992.0);
  return u >= p;
}
// codegen:end

}  // namespace strata::ops

// RMSprop, Adagrad and Adadelta's argument structs and element updates.
#include "strata/ops/table/optim_args.h"  // IWYU pragma: export
