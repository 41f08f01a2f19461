// linear (forward, backward data, backward weight with bias) and the element-wise
// ops (relu, add, scale, axpy, dropout) on each CPU backend against the reference,
// on contiguous, NHWC, mixed-layout and strided views. Tolerances: kTolGemm for
// linear (kTolReduction for its bias gradient), kTolElementwise for element-wise
// ops, bitwise for dropout (same mask, same scaling).
#include <string>

#include "cpu_backend_test_util.h"

namespace strata::testing {
namespace {

STRATA_COVERS(linear_fwd, "vs_reference");
STRATA_COVERS(linear_bwd_data, "vs_reference");
STRATA_COVERS(linear_bwd_weight, "vs_reference");
STRATA_COVERS(relu_fwd, "vs_reference");
STRATA_COVERS(relu_bwd, "vs_reference");
STRATA_COVERS(add, "vs_reference");
STRATA_COVERS(scale, "vs_reference");
STRATA_COVERS(axpy, "vs_reference");
STRATA_COVERS(dropout_fwd, "vs_reference");
STRATA_COVERS(dropout_bwd, "vs_reference");

class LinearElementwiseTest : public CpuBackendTest {};

// ---------------------------------------------------------------- linear

struct LinearCase {
  std::string name;
  int64_t n, in, out;
  bool bias = true;
  bool transposed = false;  // x and w are transposed views of [in, n] and [in, out]
};

void check_linear(Backend& be, ReferenceBackend& ref, const LinearCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  const Tensor x = c.transposed ? rand_f32({c.in, c.n}, seed).permute({1, 0}) : rand_f32({c.n, c.in}, seed);
  const Tensor w = c.transposed ? rand_f32({c.in, c.out}, seed + 1).permute({1, 0}) : rand_f32({c.out, c.in}, seed + 1);
  const Tensor b = c.bias ? rand_f32({c.out}, seed + 2) : Tensor();
  const Tensor dy = c.transposed ? rand_f32({c.out, c.n}, seed + 3).permute({1, 0}) : rand_f32({c.n, c.out}, seed + 3);

  const Tensor y = nan_tensor({c.n, c.out}), y_r = nan_tensor({c.n, c.out});
  be.linear_fwd({x, w, b, y});
  ref.linear_fwd({x, w, b, y_r});
  STRATA_EXPECT_CLOSE(y, y_r, kTolGemm, "linear_fwd");

  const Tensor dx = nan_tensor({c.n, c.in}), dx_r = nan_tensor({c.n, c.in});
  be.linear_bwd_data({dy, w, dx});
  ref.linear_bwd_data({dy, w, dx_r});
  STRATA_EXPECT_CLOSE(dx, dx_r, kTolGemm, "linear_bwd_data");

  // dw as a transposed view too when the case asks for it: outputs of any strides.
  const Tensor dw = c.transposed ? nan_tensor({c.in, c.out}).permute({1, 0}) : nan_tensor({c.out, c.in});
  const Tensor dw_r = nan_tensor({c.out, c.in});
  const Tensor db = c.bias ? nan_tensor({c.out}) : Tensor(), db_r = c.bias ? nan_tensor({c.out}) : Tensor();
  be.linear_bwd_weight({x, dy, dw, db});
  ref.linear_bwd_weight({x, dy, dw_r, db_r});
  STRATA_EXPECT_CLOSE(dw, dw_r, kTolGemm, "linear_bwd_weight dw");
  if (c.bias) {
    STRATA_EXPECT_CLOSE(db, db_r, kTolReduction, "linear_bwd_weight db");
  }
}

TEST_P(LinearElementwiseTest, Linear) {
  const std::vector<LinearCase> cases = {
      {"small_3x5to7", 3, 5, 7},
      {"batch1_no_bias", 1, 17, 9, false},
      {"transposed_views", 4, 6, 5, true, true},
      {"lenet_fc_8x400to120", 8, 400, 120},
      {"resnet50_fc_2x2048to1000", 2, 2048, 1000},
  };
  uint64_t seed = 6000;
  for (const LinearCase& c : cases) check_linear(be(), ref_, c, seed += 10);
}

// linear with an activation epilogue (LinearFwdArgs::act; each CPU backend composes it of its
// product and formula) and the data gradient through it, for two formulas; batch 1 and strided x.
TEST_P(LinearElementwiseTest, LinearActivation) {
  uint64_t seed = 6500;
  for (ops::UnaryFn act : {ops::UnaryFn::gelu_tanh, ops::UnaryFn::tanh})
    for (const LinearCase& c : {LinearCase{"small_3x5to7", 3, 5, 7}, LinearCase{"batch1_no_bias", 1, 17, 9, false},
                                LinearCase{"transposed_x", 4, 6, 5, true, true}}) {
      SCOPED_TRACE(c.name + " " + std::string(ops::unary_name(act)));
      seed += 10;
      const Tensor x = c.transposed ? rand_f32({c.in, c.n}, seed).permute({1, 0}) : rand_f32({c.n, c.in}, seed);
      const Tensor w = rand_f32({c.out, c.in}, seed + 1);
      const Tensor b = c.bias ? rand_f32({c.out}, seed + 2) : Tensor();
      const Tensor y = nan_tensor({c.n, c.out}), pre = nan_tensor({c.n, c.out});
      const Tensor y_r = nan_tensor({c.n, c.out}), pre_r = nan_tensor({c.n, c.out});
      be().linear_fwd({x, w, b, y, act, pre});
      ref_.linear_fwd({x, w, b, y_r, act, pre_r});
      STRATA_EXPECT_CLOSE(pre, pre_r, kTolGemm, "linear_fwd with an activation: pre-activation");
      STRATA_EXPECT_CLOSE(y, y_r, kTolGemm, "linear_fwd with an activation: y");
      const Tensor dy = rand_f32({c.n, 3}, seed + 3), w2 = rand_f32({3, c.out}, seed + 4);
      const Tensor dpre = nan_tensor({c.n, c.out}), dpre_r = nan_tensor({c.n, c.out});
      be().linear_bwd_data({dy, w2, dpre, act, pre_r, y_r});
      ref_.linear_bwd_data({dy, w2, dpre_r, act, pre_r, y_r});
      STRATA_EXPECT_CLOSE(dpre, dpre_r, kTolGemm, "linear_bwd_data with an activation");
    }
}

// linear with a layer-norm prologue (LinearFwdArgs::norm_eps: each CPU backend runs its layer norm
// into the scratch rows, then its product): the bits of those two calls, and the reference's values;
// batch 1, a strided x, no layer-norm weight, GELU's epilogue.
TEST_P(LinearElementwiseTest, LinearNormPrologue) {
  uint64_t seed = 6600;
  for (const LinearCase& c : {LinearCase{"small_3x5to7", 3, 5, 7}, LinearCase{"batch1_no_bias", 1, 17, 9, false},
                              LinearCase{"transposed_x", 4, 6, 5, true, true}})
    for (const bool affine : {true, false}) {
      SCOPED_TRACE(c.name + (affine ? " affine" : ""));
      seed += 10;
      const Tensor x = c.transposed ? rand_f32({c.in, c.n}, seed).permute({1, 0}) : rand_f32({c.n, c.in}, seed);
      const Tensor w = rand_f32({c.out, c.in}, seed + 1), b = c.bias ? rand_f32({c.out}, seed + 2) : Tensor();
      const Tensor nw = affine ? rand_f32({c.in}, seed + 3) : Tensor(), nb = affine ? rand_f32({c.in}, seed + 4) : Tensor();
      const std::optional<ops::UnaryFn> act = c.bias ? std::optional(ops::UnaryFn::gelu_tanh) : std::nullopt;
      const auto fused = [&](auto& backend, const Tensor& y, const Tensor& pre) {
        ops::LinearFwdArgs a{x, w, b, y, act, pre};
        a.norm_w = nw;
        a.norm_b = nb;
        const Tensor normed = nan_tensor({c.n, c.in}), mean = nan_tensor({c.n}), rstd = nan_tensor({c.n});
        a.normed = normed;
        a.norm_mean = mean;
        a.norm_rstd = rstd;
        a.norm_eps = 1e-5;
        backend.linear_fwd(a);
      };
      const Tensor y = nan_tensor({c.n, c.out}), pre = act ? nan_tensor({c.n, c.out}) : Tensor();
      fused(be(), y, pre);
      const Tensor ln = nan_tensor({c.n, c.in}), m = nan_tensor({c.n}), r = nan_tensor({c.n});
      be().layer_norm_fwd({x, nw, nb, ln, m, r, 1e-5});
      const Tensor y2 = nan_tensor({c.n, c.out}), pre2 = act ? nan_tensor({c.n, c.out}) : Tensor();
      be().linear_fwd({ln, w, b, y2, act, pre2});
      EXPECT_TRUE(bitwise_equal(y, y2)) << "not the layer norm, then the product";
      const Tensor yr = nan_tensor({c.n, c.out}), prer = act ? nan_tensor({c.n, c.out}) : Tensor();
      fused(ref_, yr, prer);
      STRATA_EXPECT_CLOSE(y, yr, kTolGemm, "linear_fwd with a layer-norm prologue");
    }
}

// linear with a residual added (LinearFwdArgs::z; composed of the product and an add on the CPU).
TEST_P(LinearElementwiseTest, LinearResidual) {
  uint64_t seed = 6700;
  for (const LinearCase& c : {LinearCase{"small_3x5to7", 3, 5, 7}, LinearCase{"batch1_no_bias", 1, 17, 9, false},
                              LinearCase{"transposed_x", 4, 6, 5, true, true}}) {
    SCOPED_TRACE(c.name);
    seed += 10;
    const Tensor x = c.transposed ? rand_f32({c.in, c.n}, seed).permute({1, 0}) : rand_f32({c.n, c.in}, seed);
    const Tensor w = rand_f32({c.out, c.in}, seed + 1);
    const Tensor b = c.bias ? rand_f32({c.out}, seed + 2) : Tensor();
    const Tensor z = c.transposed ? rand_f32({c.out, c.n}, seed + 3).permute({1, 0}) : rand_f32({c.n, c.out}, seed + 3);
    const Tensor y = nan_tensor({c.n, c.out}), y_r = nan_tensor({c.n, c.out});
    be().linear_fwd({x, w, b, y, std::nullopt, {}, z});
    ref_.linear_fwd({x, w, b, y_r, std::nullopt, {}, z});
    STRATA_EXPECT_CLOSE(y, y_r, kTolGemm, "linear_fwd with a residual");
  }
}

// ---------------------------------------------------------------- element-wise

// Layout pairs (input, output) the element-wise ops run on.
struct Layouts {
  std::string name;
  Shape shape;
  MemoryFormat in, out;
};
const std::vector<Layouts>& layouts() {
  static const std::vector<Layouts> l = {{"nchw_odd", {2, 3, 5, 7}, kNCHW, kNCHW},
                                         {"nhwc", {2, 8, 4, 4}, kNHWC, kNHWC},
                                         {"nchw_to_nhwc", {2, 5, 3, 3}, kNCHW, kNHWC},
                                         {"flat_1001", {1001}, kNCHW, kNCHW},
                                         // Above onednn's small-op threshold (kLoopBelow,
                                         // 32768 elements): its primitives run.
                                         {"large_nchw", {2, 32, 24, 24}, kNCHW, kNCHW},
                                         {"large_nhwc", {2, 32, 24, 24}, kNHWC, kNHWC},
                                         {"large_nhwc_to_nchw", {2, 32, 24, 24}, kNHWC, kNCHW}};
  return l;
}

TEST_P(LinearElementwiseTest, Relu) {
  uint64_t seed = 7000;
  for (const Layouts& l : layouts()) {
    SCOPED_TRACE(l.name);
    const Tensor x = rand_f32(l.shape, seed += 10, l.in);
    const Tensor y = nan_tensor(l.shape, l.out), y_r = nan_tensor(l.shape, l.out);
    be().relu_fwd({x, y});
    ref_.relu_fwd({x, y_r});
    STRATA_EXPECT_CLOSE(y, y_r, kTolElementwise, "relu_fwd");
    const Tensor dy = rand_f32(l.shape, seed + 1, l.in);
    const Tensor dx = nan_tensor(l.shape, l.out), dx_r = nan_tensor(l.shape, l.out);
    be().relu_bwd({y_r, dy, dx});
    ref_.relu_bwd({y_r, dy, dx_r});
    STRATA_EXPECT_CLOSE(dx, dx_r, kTolElementwise, "relu_bwd");
  }
  // A strided view in and out.
  const Tensor x = rand_f32({4, 9}, seed + 2).narrow(1, 2, 5);
  const Tensor y = nan_tensor({4, 7}).narrow(1, 1, 5), y_r = nan_tensor({4, 5});
  be().relu_fwd({x, y});
  ref_.relu_fwd({x, y_r});
  STRATA_EXPECT_CLOSE(y, y_r, kTolElementwise, "relu_fwd strided view");
}

TEST_P(LinearElementwiseTest, AddScaleAxpy) {
  uint64_t seed = 8000;
  for (const Layouts& l : layouts()) {
    SCOPED_TRACE(l.name);
    const Tensor a = rand_f32(l.shape, seed += 10, l.in), b = rand_f32(l.shape, seed + 1, l.out);
    const Tensor y = nan_tensor(l.shape, l.out), y_r = nan_tensor(l.shape, l.out);
    be().add({a, b, y});
    ref_.add({a, b, y_r});
    STRATA_EXPECT_CLOSE(y, y_r, kTolElementwise, "add");

    const Tensor s = nan_tensor(l.shape, l.out), s_r = nan_tensor(l.shape, l.out);
    be().scale({a, s, -2.5});
    ref_.scale({a, s_r, -2.5});
    STRATA_EXPECT_CLOSE(s, s_r, kTolElementwise, "scale");

    const Tensor acc = copy_of(b), acc_r = copy_of(b);
    be().axpy({a, acc, 0.75});
    ref_.axpy({a, acc_r, 0.75});
    STRATA_EXPECT_CLOSE(acc, acc_r, kTolElementwise, "axpy");
  }
  // Broadcast operands (stride 0, as ops::broadcast makes them): GPT's position embeddings
  // [1, T, C] expanded over the batch, and a row repeated down a matrix on the left.
  const Tensor tok = rand_f32({3, 8, 5}, seed + 2), pos = rand_f32({1, 8, 5}, seed + 3);
  const Tensor pos_b = pos.as_strided({3, 8, 5}, {0, 5, 1}, pos.offset());
  const Tensor row = rand_f32({1, 5}, seed + 4).as_strided({8, 5}, {0, 1}, 0);
  const Tensor y = nan_tensor({3, 8, 5}), y_r = nan_tensor({3, 8, 5});
  be().add({tok, pos_b, y});
  ref_.add({tok, pos_b, y_r});
  STRATA_EXPECT_CLOSE(y, y_r, kTolElementwise, "add of a broadcast operand");
  const Tensor z = nan_tensor({8, 5}), z_r = nan_tensor({8, 5});
  be().add({row, tok.select(0, 1), z});
  ref_.add({row, tok.select(0, 1), z_r});
  STRATA_EXPECT_CLOSE(z, z_r, kTolElementwise, "add of a broadcast left operand");
  const Tensor s = nan_tensor({8, 5}), s_r = nan_tensor({8, 5});
  be().scale({row, s, 3.0});
  ref_.scale({row, s_r, 3.0});
  STRATA_EXPECT_CLOSE(s, s_r, kTolElementwise, "scale of a broadcast operand");
}

TEST_P(LinearElementwiseTest, DropoutMatchesReferenceBitwise) {
  uint64_t seed = 9000;
  for (const Layouts& l : layouts()) {
    SCOPED_TRACE(l.name);
    const Tensor x = rand_f32(l.shape, seed += 10, l.in);
    const Tensor y = nan_tensor(l.shape, l.out), y_r = nan_tensor(l.shape, l.out);
    const Tensor m = Tensor::empty(l.shape, DType::u8, Device::cpu(), l.out);
    const Tensor m_r = Tensor::empty(l.shape, DType::u8, Device::cpu(), l.out);
    ops::DropoutFwdArgs f{x, y, m};
    f.p = 0.3, f.seed = 11, f.offset = 5;
    be().dropout_fwd(f);
    f.y = y_r, f.mask = m_r;
    ref_.dropout_fwd(f);
    EXPECT_TRUE(bitwise_equal(m, m_r)) << "[dropout_fwd mask]";
    EXPECT_TRUE(bitwise_equal(y, y_r)) << "[dropout_fwd y]";

    const Tensor dy = rand_f32(l.shape, seed + 1, l.in);
    const Tensor dx = nan_tensor(l.shape, l.out), dx_r = nan_tensor(l.shape, l.out);
    be().dropout_bwd({dy, m_r, dx, 0.3});
    ref_.dropout_bwd({dy, m_r, dx_r, 0.3});
    EXPECT_TRUE(bitwise_equal(dx, dx_r)) << "[dropout_bwd]";
  }
}

// Graph mode's form: seed and offset read from memory (`rng`) replace the arguments.
TEST_P(LinearElementwiseTest, DropoutReadsSeedAndOffsetFromRng) {
  const Shape shape{3, 5, 7};
  const Tensor x = rand_f32(shape, 9100);
  const Tensor rng = Tensor::from_vector(std::vector<int64_t>{11, 5}, Shape{2});
  auto draw = [&](uint64_t seed, uint64_t offset, bool from_rng) {
    const Tensor y = nan_tensor(shape), m = Tensor::empty(shape, DType::u8, Device::cpu());
    ops::DropoutFwdArgs f{x, y, m};
    f.p = 0.3, f.seed = seed, f.offset = offset;
    if (from_rng) f.rng = rng;
    be().dropout_fwd(f);
    return std::pair{y, m};
  };
  const auto [y, m] = draw(0, 0, true);  // the arguments' seed and offset are not read
  const auto [y_args, m_args] = draw(11, 5, false);
  EXPECT_TRUE(bitwise_equal(m, m_args));
  EXPECT_TRUE(bitwise_equal(y, y_args));
  EXPECT_FALSE(bitwise_equal(m, draw(11, 6, false).second));  // the offset matters
}

STRATA_CPU_BACKEND_SUITE(LinearElementwiseTest);

}  // namespace
}  // namespace strata::testing
