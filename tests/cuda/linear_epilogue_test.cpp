// linear's epilogues and prologue on the cuda backend (op_args.h's LinearFwdArgs::act, ::z and
// ::norm_eps, LinearBwdDataArgs::act) against the reference's composition of the same values, and
// bitwise against the GPU's own composition where the fused form promises its bits (the plain
// linear: norm_pool_linear_test.cpp).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace strata::testing {
namespace {

class CudaLinearEpilogues : public CudaTest {};

// linear with GELU as its epilogue (LinearFwdArgs::act) and the data gradient with GELU's
// derivative (LinearBwdDataArgs::act) against the reference's composition (the product, then the
// formula) of the same values: cuBLASLt's GELU_AUX(_BIAS) and DGELU epilogues in f16/bf16 where the
// pre-activation's rows are a multiple of 8 elements, the few-rows kernel's GELU at up to 4 rows
// (bitwise the GPU's own product, then unary op), the composition on the GPU otherwise (f32, odd
// widths). y and pre both checked; a second call gives the same bits.
TEST_F(CudaLinearEpilogues, LinearActivationEpilogue) {
  struct Case {
    int64_t n, in, out, next;  // x [n, in] -> pre, y [n, out]; then dy [n, next] through w2 [next, out]
    bool bias;
  };
  auto f32 = [](const Tensor& t) { return host_as(t, DType::f32); };
  uint64_t seed = 2100;
  for (DType dt : {DType::bf16, DType::f16, DType::f32})
    for (const Case& c : std::vector<Case>{{64, 96, 256, 40, true},
                                           {33, 40, 24, 16, false},
                                           {7, 16, 21, 9, true},
                                           {2, 768, 3072, 768, true},
                                           {1, 8, 8, 8, true}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " N" << c.n << " in" << c.in << " out" << c.out
                                        << " next" << c.next << (c.bias ? " bias" : ""));
      const double tol = testing::tol(dt, kTolGemm);
      const Tensor x = random_tensor({c.n, c.in}, dt, seed++), w = random_tensor({c.out, c.in}, dt, seed++);
      const Tensor b = c.bias ? random_tensor({c.out}, dt, seed++) : Tensor();
      const Tensor y = gpu_nan({c.n, c.out}, kNCHW, dt), pre = gpu_nan({c.n, c.out}, kNCHW, dt);
      const Tensor y_ref = cpu_nan({c.n, c.out}), pre_ref = cpu_nan({c.n, c.out});
      const Tensor b_gpu = c.bias ? to_gpu(b) : Tensor(), b_ref = c.bias ? f32(b) : Tensor();
      be().linear_fwd({to_gpu(x), to_gpu(w), b_gpu, y, ops::UnaryFn::gelu_tanh, pre});
      ref_.linear_fwd({f32(x), f32(w), b_ref, y_ref, ops::UnaryFn::gelu_tanh, pre_ref});
      STRATA_EXPECT_CLOSE(pre, pre_ref, tol, "linear_fwd gelu: pre-activation");
      STRATA_EXPECT_CLOSE(y, y_ref, tol, "linear_fwd gelu: y");
      const Tensor again = gpu_nan({c.n, c.out}, kNCHW, dt), pre_again = gpu_nan({c.n, c.out}, kNCHW, dt);
      be().linear_fwd({to_gpu(x), to_gpu(w), b_gpu, again, ops::UnaryFn::gelu_tanh, pre_again});
      EXPECT_TRUE(same_values(again, y) && same_values(pre_again, pre)) << "a second call differs";
      if (c.n <= 4) {  // the few-rows kernel's GELU: the bits of its product, then the unary op
        const Tensor y2 = gpu_nan({c.n, c.out}, kNCHW, dt), pre2 = gpu_nan({c.n, c.out}, kNCHW, dt);
        be().linear_fwd({to_gpu(x), to_gpu(w), b_gpu, pre2});
        be().unary_fwd({pre2, y2, ops::UnaryFn::gelu_tanh});
        EXPECT_TRUE(same_values(pre, pre2) && same_values(y, y2)) << "few rows: not the product, then the formula";
      }

      // The backward from the GPU's own pre and y (the reference reads the same values).
      const Tensor dy = random_tensor({c.n, c.next}, dt, seed++), w2 = random_tensor({c.next, c.out}, dt, seed++);
      const Tensor dpre = gpu_nan({c.n, c.out}, kNCHW, dt), dpre_ref = cpu_nan({c.n, c.out});
      be().linear_bwd_data({to_gpu(dy), to_gpu(w2), dpre, ops::UnaryFn::gelu_tanh, pre, y});
      ref_.linear_bwd_data({f32(dy), f32(w2), dpre_ref, ops::UnaryFn::gelu_tanh, f32(pre), f32(y)});
      STRATA_EXPECT_CLOSE(dpre, dpre_ref, tol, "linear_bwd_data gelu: gradient at the pre-activation");
    }
}

// linear with a layer-norm prologue (LinearFwdArgs::norm_eps): at 1 to 4 rows the few-rows kernel
// normalises each row as it reads it, which must give the bits of layer_norm_fwd's rows followed by
// the product (and GELU's epilogue); 5 rows run that composition itself. K of 768 (16-byte loads),
// 40 (five chunks of eight a row) and 13 (a partial chunk, element loads); with and without the
// layer norm's weight and bias; against the reference's layer norm, then product, too.
TEST_F(CudaLinearEpilogues, LinearNormPrologue) {
  struct Case {
    int64_t n, in, out;
    bool affine, gelu;
  };
  auto f32 = [](const Tensor& t) { return t.defined() ? host_as(t, DType::f32) : Tensor(); };
  auto gpu = [](const Tensor& t) { return t.defined() ? to_gpu(t) : Tensor(); };
  uint64_t seed = 2300;
  for (DType dt : {DType::bf16, DType::f16, DType::f32})
    for (const Case& c : std::vector<Case>{{1, 768, 2304, true, false},
                                           {1, 768, 3072, true, true},
                                           {4, 40, 24, true, false},
                                           {3, 13, 9, false, true},
                                           {2, 64, 16, false, false},
                                           {5, 40, 24, true, true}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " N" << c.n << " in" << c.in << " out" << c.out
                                        << (c.affine ? " affine" : "") << (c.gelu ? " gelu" : ""));
      const double tol = testing::tol(dt, kTolGemm);
      const std::optional<ops::UnaryFn> act = c.gelu ? std::optional(ops::UnaryFn::gelu_tanh) : std::nullopt;
      const Tensor x = random_tensor({c.n, c.in}, dt, seed++, -3.0, 3.0), w = random_tensor({c.out, c.in}, dt, seed++);
      const Tensor b = random_tensor({c.out}, dt, seed++);
      const Tensor nw = c.affine ? random_tensor({c.in}, dt, seed++) : Tensor();
      const Tensor nb = c.affine ? random_tensor({c.in}, dt, seed++) : Tensor();
      const Tensor xg = to_gpu(x), wg = to_gpu(w), bg = to_gpu(b), nwg = gpu(nw), nbg = gpu(nb);
      const DType st = DType::f32;
      const Tensor y = gpu_nan({c.n, c.out}, kNCHW, dt), pre = c.gelu ? gpu_nan({c.n, c.out}, kNCHW, dt) : Tensor();
      const Tensor normed = gpu_nan({c.n, c.in}, kNCHW, dt), mean = gpu_nan({c.n}, kNCHW, st),
                   rstd = gpu_nan({c.n}, kNCHW, st);
      ops::LinearFwdArgs a{xg, wg, bg, y, act, pre};
      a.norm_w = nwg;
      a.norm_b = nbg;
      a.normed = normed;
      a.norm_mean = mean;
      a.norm_rstd = rstd;
      a.norm_eps = 1e-5;
      be().linear_fwd(a);
      // The composition on the GPU: layer_norm_fwd, then the product.
      const Tensor ln = gpu_nan({c.n, c.in}, kNCHW, dt), m2 = gpu_nan({c.n}, kNCHW, st), r2 = gpu_nan({c.n}, kNCHW, st);
      be().layer_norm_fwd({xg, nwg, nbg, ln, m2, r2, 1e-5});
      const Tensor y2 = gpu_nan({c.n, c.out}, kNCHW, dt), pre2 = c.gelu ? gpu_nan({c.n, c.out}, kNCHW, dt) : Tensor();
      be().linear_fwd({ln, wg, bg, y2, act, pre2});
      EXPECT_TRUE(same_values(y, y2)) << "not the layer norm's rows, then the product";
      if (c.gelu) {
        EXPECT_TRUE(same_values(pre, pre2)) << "pre-activation";
      }
      // The reference: its layer norm of the same values, then its product.
      const Tensor lnr = cpu_nan({c.n, c.in}), mr = cpu_nan({c.n}), rr = cpu_nan({c.n});
      ref_.layer_norm_fwd({f32(x), f32(nw), f32(nb), lnr, mr, rr, 1e-5});
      const Tensor yr = cpu_nan({c.n, c.out}), prer = c.gelu ? cpu_nan({c.n, c.out}) : Tensor();
      ref_.linear_fwd({lnr, f32(w), f32(b), yr, act, prer});
      STRATA_EXPECT_CLOSE(y, yr, tol, "linear_fwd with a layer-norm prologue against the reference");
    }
}

// linear with a residual added (LinearFwdArgs::z) against the reference's product, then add:
// cuBLASLt's C operand in f16/bf16 (with and without the bias epilogue), the few-rows kernel's own
// sum (1 to 4 rows, z a transposed view), the product then the add in f32.
TEST_F(CudaLinearEpilogues, LinearResidual) {
  struct Case {
    int64_t n, in, out;
    bool bias, z_transposed;
  };
  auto f32 = [](const Tensor& t) { return host_as(t, DType::f32); };
  uint64_t seed = 2200;
  for (DType dt : {DType::bf16, DType::f16, DType::f32})
    for (const Case& c : std::vector<Case>{{64, 96, 256, true, false},
                                           {33, 40, 24, false, false},
                                           {7, 16, 21, true, true},
                                           {1, 768, 768, true, false},
                                           {3, 64, 40, false, true}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " N" << c.n << " in" << c.in << " out" << c.out
                                        << (c.bias ? " bias" : "") << (c.z_transposed ? " z^T view" : ""));
      const double tol = testing::tol(dt, kTolGemm);
      const Tensor x = random_tensor({c.n, c.in}, dt, seed++), w = random_tensor({c.out, c.in}, dt, seed++);
      const Tensor b = c.bias ? random_tensor({c.out}, dt, seed++) : Tensor();
      const Tensor z = c.z_transposed ? random_tensor({c.out, c.n}, dt, seed++).permute({1, 0})
                                      : random_tensor({c.n, c.out}, dt, seed++);
      const Tensor y = gpu_nan({c.n, c.out}, kNCHW, dt), y_ref = cpu_nan({c.n, c.out});
      const Tensor z_gpu = c.z_transposed ? to_gpu(z.permute({1, 0})).permute({1, 0}) : to_gpu(z);
      be().linear_fwd({to_gpu(x), to_gpu(w), c.bias ? to_gpu(b) : Tensor(), y, std::nullopt, {}, z_gpu});
      ref_.linear_fwd({f32(x), f32(w), c.bias ? f32(b) : Tensor(), y_ref, std::nullopt, {}, f32(z)});
      STRATA_EXPECT_CLOSE(y, y_ref, tol, "linear_fwd with a residual");
    }
}

}  // namespace
}  // namespace strata::testing
