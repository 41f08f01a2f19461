// Layer norm and attention on each production CPU backend against the reference backend, in
// f32 and f64: strided rows, a permuted [B, Tq, H, D] layout, causal and full attention, one
// query over a cache of keys, size-1 dims; gradients of every input.
#include <gtest/gtest.h>

#include <string>

#include "cpu_backend_test_util.h"
#include "support/coverage.h"

namespace strata::testing {
namespace {

STRATA_COVERS(layer_norm_fwd, "vs_reference");
STRATA_COVERS(layer_norm_bwd, "vs_reference");
STRATA_COVERS(attention_fwd, "vs_reference");
STRATA_COVERS(attention_bwd, "vs_reference");

class CpuTransformerOps : public CpuBackendTest {};

std::string what(const char* op, DType dt, const std::string& extra) {
  return std::string(op) + " " + std::string(dtype_name(dt)) + " " + extra;
}
DType stats(DType dt) { return dt == DType::f64 ? DType::f64 : DType::f32; }

TEST_P(CpuTransformerOps, LayerNormMatchesTheReference) {
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& [n, c] : {std::pair{6, 33}, std::pair{1, 1}, std::pair{17, 8}}) {
      const Tensor x = random_tensor({n, c + 2}, dt, 1, -3.0, 3.0).narrow(1, 2, c);
      const Tensor w = random_tensor({c}, dt, 2), b = random_tensor({c}, dt, 3), dy = random_tensor({n, c}, dt, 4);
      auto run = [&](auto& backend, const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                     const Tensor& dw, const Tensor& db) {
        backend.layer_norm_fwd({x, w, b, y, mean, rstd, 1e-5});
        backend.layer_norm_bwd({x, w, mean, rstd, dy, dx, dw, db});
      };
      const Tensor y = nan_tensor({n, c}, kNCHW, dt), m = nan_tensor({n}, kNCHW, stats(dt)),
                   r = nan_tensor({n}, kNCHW, stats(dt)), dx = nan_tensor({n, c}, kNCHW, dt),
                   dw = nan_tensor({c}, kNCHW, dt), db = nan_tensor({c}, kNCHW, dt);
      const Tensor y2 = nan_tensor({n, c}, kNCHW, dt), m2 = nan_tensor({n}, kNCHW, stats(dt)),
                   r2 = nan_tensor({n}, kNCHW, stats(dt)), dx2 = nan_tensor({n, c}, kNCHW, dt),
                   dw2 = nan_tensor({c}, kNCHW, dt), db2 = nan_tensor({c}, kNCHW, dt);
      run(be(), y, m, r, dx, dw, db);
      run(ref_, y2, m2, r2, dx2, dw2, db2);
      const std::string s = what("layer_norm", dt, std::to_string(n) + "x" + std::to_string(c));
      STRATA_EXPECT_CLOSE(y, y2, kTolReduction, s + " y");
      STRATA_EXPECT_CLOSE(r, r2, kTolReduction, s + " rstd");
      STRATA_EXPECT_CLOSE(dx, dx2, kTolReduction, s + " dx");
      STRATA_EXPECT_CLOSE(dw, dw2, kTolReduction, s + " dweight");
      STRATA_EXPECT_CLOSE(db, db2, kTolReduction, s + " dbias");
    }
}

TEST_P(CpuTransformerOps, AttentionMatchesTheReference) {
  struct Case {
    int64_t b, h, tq, tk, d;
    bool causal;
  };
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : {Case{2, 3, 7, 7, 8, true}, Case{1, 2, 1, 9, 4, true}, Case{1, 1, 5, 3, 3, false},
                          Case{3, 2, 4, 6, 5, true}}) {
      // q, k, v as the permuted heads of [B, T, H, D] projections.
      const Tensor q = random_tensor({c.b, c.tq, c.h, c.d}, dt, 5).permute({0, 2, 1, 3});
      const Tensor k = random_tensor({c.b, c.tk, c.h, c.d}, dt, 6).permute({0, 2, 1, 3});
      const Tensor v = random_tensor({c.b, c.tk, c.h, c.d}, dt, 7).permute({0, 2, 1, 3});
      const Tensor dy = random_tensor({c.b, c.h, c.tq, c.d}, dt, 8);
      const Shape ys{c.b, c.h, c.tq, c.d}, ls{c.b, c.h, c.tq};
      Tensor out[2][7];
      for (int i = 0; i < 2; ++i) {
        for (Tensor* t : {&out[i][0], &out[i][2]}) *t = nan_tensor(ys, kNCHW, dt);
        out[i][1] = nan_tensor(ls, kNCHW, stats(dt));
        out[i][3] = nan_tensor(ls, kNCHW, stats(dt));
        out[i][4] = nan_tensor(q.sizes(), kNCHW, dt);
        out[i][5] = nan_tensor(k.sizes(), kNCHW, dt);
        out[i][6] = nan_tensor(v.sizes(), kNCHW, dt);
      }
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      auto run = [&](auto& backend, Tensor* o) {
        backend.attention_fwd({q, k, v, o[0], o[1], {}, scale, c.causal});
        backend.attention_bwd({q, k, v, o[0], o[1], dy, o[3], o[4], o[5], o[6], {}, scale, c.causal});
      };
      run(be(), out[0]);
      run(ref_, out[1]);
      const std::string s = what("attention", dt,
                                 "tq " + std::to_string(c.tq) + " tk " + std::to_string(c.tk) + (c.causal ? " causal" : ""));
      const char* names[] = {" y", " lse", "", " delta", " dq", " dk", " dv"};
      for (int i : {0, 1, 3, 4, 5, 6}) STRATA_EXPECT_CLOSE(out[0][i], out[1][i], kTolReduction, s + names[i]);
    }
}

STRATA_CPU_BACKEND_SUITE(CpuTransformerOps);

}  // namespace
}  // namespace strata::testing
