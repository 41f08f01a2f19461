// bf16 on the onednn backend: conv2d (forward, backward data, weight, bias), linear,
// pooling, relu and add against the f32 reference on the same bf16-rounded values where the
// CPU runs bf16 natively (AVX512_BF16 or AMX); elsewhere supports() says no and a
// bf16 call fails naming the missing ISA. ctest runs this suite a second time with
// DNNL_MAX_CPU_ISA=AVX512_CORE, so both branches run on a bf16 machine.
#include "cpu_backend_test_util.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

#ifdef STRATA_HAVE_BACKEND_ONEDNN
using backends::OneDnnBackend;
using ops::OpId;

// bf16 keeps 8 bits of mantissa: relative error ~2^-8 per rounding, and the outputs
// are rounded once more.
constexpr double kTolBf16 = 2e-2;

const Shape kX{2, 16, 9, 9}, kW{32, 16, 3, 3}, kY{2, 32, 9, 9};

Tensor bf16(const Shape& s, uint64_t seed, MemoryFormat fmt = kNCHW) {
  return random_tensor(s, DType::bf16, seed, -1, 1, fmt);
}
// NaN in bf16 (the reference backend fills f32 and f64 only).
Tensor nan_bf16(const Shape& s, MemoryFormat fmt = kNCHW) {
  Tensor t = Tensor::empty(s, DType::bf16, Device::cpu(), fmt);
  copy_into(nan_tensor(s, fmt), t);
  return t;
}
Tensor f32(const Tensor& t) {
  Tensor o =
      Tensor::empty(t.sizes(), DType::f32, Device::cpu(), t.is_channels_last() && !t.is_contiguous() ? kNHWC : kNCHW);
  copy_into(t, o);
  return o;
}

void check_conv(OneDnnBackend& be, ReferenceBackend& ref, MemoryFormat fmt) {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const Tensor x = bf16(kX, 30, fmt), w = bf16(kW, 31, fmt), b = bf16({32}, 32), dy = bf16(kY, 33, fmt);
  const Tensor y = nan_bf16(kY, fmt), y_ref = nan_tensor(kY, fmt);
  be.conv2d_fwd({x, w, b, y, p});
  ref.conv2d_fwd({f32(x), f32(w), f32(b), y_ref, p});
  STRATA_EXPECT_CLOSE(f32(y), y_ref, kTolBf16, "conv2d_fwd bf16");
  // The inference epilogue as oneDNN post-ops (sum, eltwise_relu) on the f32 accumulators:
  // one rounding to bf16 where the separate ops round three times, within kTolBf16.
  const Tensor z = bf16(kY, 34, fmt), y_fused = nan_bf16(kY, fmt), conv_ref = nan_tensor(kY, fmt);
  const Tensor sum_ref = nan_tensor(kY, fmt), relu_ref = nan_tensor(kY, fmt);
  ops::Conv2dFwdArgs fused{x, w, b, y_fused, p};
  fused.z = z;
  fused.relu = true;
  be.conv2d_fwd(fused);
  ref.conv2d_fwd({f32(x), f32(w), f32(b), conv_ref, p});
  ref.add({conv_ref, f32(z), sum_ref});
  ref.relu_fwd({sum_ref, relu_ref});
  STRATA_EXPECT_CLOSE(f32(y_fused), relu_ref, kTolBf16, "conv2d_fwd bf16 with residual and relu");
  const Tensor dx = nan_bf16(kX, fmt), dx_ref = nan_tensor(kX, fmt);
  be.conv2d_bwd_data({dy, w, dx, p});
  ref.conv2d_bwd_data({f32(dy), f32(w), dx_ref, p});
  STRATA_EXPECT_CLOSE(f32(dx), dx_ref, kTolBf16, "conv2d_bwd_data bf16");
  const Tensor dw = nan_bf16(kW, fmt), dw_ref = nan_tensor(kW, fmt);
  be.conv2d_bwd_weight({x, dy, dw, p});
  ref.conv2d_bwd_weight({f32(x), f32(dy), dw_ref, p});
  STRATA_EXPECT_CLOSE(f32(dw), dw_ref, kTolBf16, "conv2d_bwd_weight bf16");
  const Tensor db = nan_bf16({32}), db_ref = nan_tensor({32});
  be.conv2d_bwd_bias({dy, db});
  ref.conv2d_bwd_bias({f32(dy), db_ref});
  STRATA_EXPECT_CLOSE(f32(db), db_ref, kTolBf16, "conv2d_bwd_bias bf16");
}

TEST(OneDnnBf16, MatchesReferenceWhereNativeElseFailsClearly) {
  OneDnnBackend be;
  ReferenceBackend ref;
  const Tensor x = bf16(kX, 40), w = bf16(kW, 41);
  if (!be.capabilities().supports(OpId::conv2d_fwd, DType::bf16)) {
    EXPECT_FALSE(be.capabilities().supports(OpId::relu_fwd, DType::bf16));
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    EXPECT_STRATA_ERROR(be.conv2d_fwd({x, w, Tensor(), nan_bf16(kY), p}), "conv2d_fwd",
                        "bf16 needs a CPU with AVX512_BF16", "use f32");
    EXPECT_STRATA_ERROR(be.relu_fwd({x, nan_bf16(kX)}), "relu_fwd", "AVX512_BF16");
    std::cout << "[ onednn ] no native bf16 here: " << be.describe() << "\n";
    return;
  }
  EXPECT_FALSE(be.capabilities().supports(OpId::batch_norm_fwd, DType::bf16));  // f32-only ops stay f32-only
  {
    SCOPED_TRACE("nchw");
    check_conv(be, ref, kNCHW);
  }
  {
    SCOPED_TRACE("nhwc");
    check_conv(be, ref, kNHWC);
  }
  // linear: y [8,48] = x [8,40] w^T + b, and its gradients.
  const Tensor lx = bf16({8, 40}, 50), lw = bf16({48, 40}, 51), lb = bf16({48}, 52), ldy = bf16({8, 48}, 53);
  const Tensor ly = nan_bf16({8, 48}), ly_ref = nan_tensor({8, 48});
  be.linear_fwd({lx, lw, lb, ly});
  ref.linear_fwd({f32(lx), f32(lw), f32(lb), ly_ref});
  STRATA_EXPECT_CLOSE(f32(ly), ly_ref, kTolBf16, "linear_fwd bf16");
  const Tensor ldx = nan_bf16({8, 40}), ldx_ref = nan_tensor({8, 40});
  be.linear_bwd_data({ldy, lw, ldx});
  ref.linear_bwd_data({f32(ldy), f32(lw), ldx_ref});
  STRATA_EXPECT_CLOSE(f32(ldx), ldx_ref, kTolBf16, "linear_bwd_data bf16");
  const Tensor ldw = nan_bf16({48, 40}), ldw_ref = nan_tensor({48, 40});
  const Tensor ldb = nan_bf16({48}), ldb_ref = nan_tensor({48});
  be.linear_bwd_weight({lx, ldy, ldw, ldb});
  ref.linear_bwd_weight({f32(lx), f32(ldy), ldw_ref, ldb_ref});
  STRATA_EXPECT_CLOSE(f32(ldw), ldw_ref, kTolBf16, "linear_bwd_weight bf16");
  STRATA_EXPECT_CLOSE(f32(ldb), ldb_ref, kTolBf16, "linear_bwd_weight bias bf16");
  // pooling: max (exact in the forward), average, global average; ResNet's 3x3/2 stem pool.
  {
    Pool2dParams pp;
    pp.kernel_h = pp.kernel_w = 3;
    pp.stride_h = pp.stride_w = 2;
    pp.pad_h = pp.pad_w = 1;
    const Shape ps{2, 16, 9, 9}, pys{2, 16, 5, 5};
    const Tensor px = bf16(ps, 70), pdy = bf16(pys, 71);
    const Tensor py = nan_bf16(pys), py_ref = nan_tensor(pys);
    be.max_pool2d_fwd({px, py, pp});
    ref.max_pool2d_fwd({f32(px), py_ref, pp});
    EXPECT_TRUE(bitwise_equal(f32(py), py_ref)) << "max_pool2d_fwd bf16";
    const Tensor pdx = nan_bf16(ps), pdx_ref = nan_tensor(ps);
    be.max_pool2d_bwd({px, py, pdy, pdx, pp});
    ref.max_pool2d_bwd({f32(px), py_ref, f32(pdy), pdx_ref, pp});
    STRATA_EXPECT_CLOSE(f32(pdx), pdx_ref, kTolBf16, "max_pool2d_bwd bf16");
    const Tensor ay = nan_bf16(pys), ay_ref = nan_tensor(pys);
    be.avg_pool2d_fwd({px, ay, pp});
    ref.avg_pool2d_fwd({f32(px), ay_ref, pp});
    STRATA_EXPECT_CLOSE(f32(ay), ay_ref, kTolBf16, "avg_pool2d_fwd bf16");
    const Tensor gy = nan_bf16({2, 16}), gy_ref = nan_tensor({2, 16});
    be.global_avg_pool_fwd({px, gy});
    ref.global_avg_pool_fwd({f32(px), gy_ref});
    STRATA_EXPECT_CLOSE(f32(gy), gy_ref, kTolBf16, "global_avg_pool_fwd bf16");
    const Tensor gdy = bf16({2, 16}, 72), gdx = nan_bf16(ps), gdx_ref = nan_tensor(ps);
    be.global_avg_pool_bwd({gdy, gdx});
    ref.global_avg_pool_bwd({f32(gdy), gdx_ref});
    STRATA_EXPECT_CLOSE(f32(gdx), gdx_ref, kTolBf16, "global_avg_pool_bwd bf16");
  }
  // relu and add on bf16 values, small and large (the f32 small-tensor loops do not
  // take bf16): relu is exact.
  for (int64_t n : {int64_t{64}, int64_t{8192}}) {
    SCOPED_TRACE(n);
    const Tensor a = bf16({n}, 60), b = bf16({n}, 61), g = bf16({n}, 62);
    const Tensor y = nan_bf16({n}), y_ref = nan_tensor({n});
    be.relu_fwd({a, y});
    ref.relu_fwd({f32(a), y_ref});
    EXPECT_TRUE(bitwise_equal(f32(y), y_ref)) << "relu_fwd bf16";
    const Tensor dx = nan_bf16({n}), dx_ref = nan_tensor({n});
    be.relu_bwd({y, g, dx});
    ref.relu_bwd({y_ref, f32(g), dx_ref});
    STRATA_EXPECT_CLOSE(f32(dx), dx_ref, 0.0, "relu_bwd bf16");  // equal values; oneDNN's zeros may be -0
    const Tensor s = nan_bf16({n}), s_ref = nan_tensor({n});
    be.add({a, b, s});
    ref.add({f32(a), f32(b), s_ref});
    STRATA_EXPECT_CLOSE(f32(s), s_ref, 4e-3, "add bf16");  // the sum is rounded to bf16
  }
}
#endif

}  // namespace
}  // namespace strata::testing
