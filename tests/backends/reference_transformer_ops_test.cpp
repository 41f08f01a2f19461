// Layer norm and attention on the reference backend: values against the formulas written out
// here element by element (attention as the masked softmax of the scaled products, the
// [Tq, Tk] matrix the op never holds), and the backward rows against central differences in
// f64, on strided operands, odd sizes, one query, one key and batch 1.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reference_test_util.h"
#include "support/coverage.h"

namespace strata::testing {
namespace {

STRATA_COVERS(layer_norm_fwd, "values");
STRATA_COVERS(layer_norm_bwd, "gradcheck");
STRATA_COVERS(attention_fwd, "values");
STRATA_COVERS(attention_bwd, "gradcheck");

double at(const Tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0, d = 0;
  for (int64_t i : idx) off += i * t.strides()[d++];
  return t.data<double>()[off];
}

// x [N, C] with a row stride larger than C (a column slice of a wider matrix).
Tensor strided_rows(int64_t n, int64_t c, uint64_t seed) {
  return random_tensor({n, c + 3}, DType::f64, seed, -2.0, 2.0).narrow(1, 1, c);
}

TEST(ReferenceTransformerOps, LayerNormNormalisesEachRow) {
  ReferenceBackend ref;
  for (const auto& [n, c, affine] : {std::tuple{5, 7, true}, std::tuple{1, 1, true}, std::tuple{3, 16, false}}) {
    const Tensor x = strided_rows(n, c, 1);
    const Tensor w = affine ? random_tensor({c}, DType::f64, 2) : Tensor();
    const Tensor b = affine ? random_tensor({c}, DType::f64, 3) : Tensor();
    const Tensor y = nan_tensor({n, c}), mean = nan_tensor({n}), rstd = nan_tensor({n});
    ref.layer_norm_fwd({x, w, b, y, mean, rstd, 1e-5});
    for (int64_t r = 0; r < n; ++r) {
      double mu = 0, var = 0;
      for (int64_t j = 0; j < c; ++j) mu += at(x, {r, j}) / c;
      for (int64_t j = 0; j < c; ++j) var += (at(x, {r, j}) - mu) * (at(x, {r, j}) - mu) / c;
      EXPECT_NEAR(at(mean, {r}), mu, 1e-12);
      EXPECT_NEAR(at(rstd, {r}), 1 / std::sqrt(var + 1e-5), 1e-9);
      for (int64_t j = 0; j < c; ++j) {
        const double want = (at(x, {r, j}) - mu) / std::sqrt(var + 1e-5) * (affine ? at(w, {j}) : 1.0) +
                            (affine ? at(b, {j}) : 0.0);
        EXPECT_NEAR(at(y, {r, j}), want, 1e-9) << "row " << r << " col " << j;
      }
    }
  }
}

TEST(ReferenceTransformerOps, LayerNormBackwardMatchesCentralDifferences) {
  ReferenceBackend ref;
  for (const auto& [n, c] : {std::pair{4, 6}, std::pair{1, 5}, std::pair{3, 1}}) {
    const Tensor x = strided_rows(n, c, 4), w = random_tensor({c}, DType::f64, 5), b = random_tensor({c}, DType::f64, 6);
    const Tensor cot = random_tensor({n, c}, DType::f64, 7);
    auto forward = [&] {
      const Tensor y = Tensor::empty({n, c}, DType::f64), m = Tensor::empty({n}, DType::f64),
                   r = Tensor::empty({n}, DType::f64);
      ref.layer_norm_fwd({x, w, b, y, m, r, 1e-5});
      return std::tuple{y, m, r};
    };
    const auto loss = [&] { return dot(std::get<0>(forward()), cot); };
    const auto [y, mean, rstd] = forward();
    const Tensor dx = nan_tensor({n, c}), dw = nan_tensor({c}), db = nan_tensor({c});
    ref.layer_norm_bwd({x, w, mean, rstd, cot, dx, dw, db});
    EXPECT_TRUE(grad_matches("layer_norm dx", dx, numeric_grad(x, loss)));
    EXPECT_TRUE(grad_matches("layer_norm dweight", dw, numeric_grad(w, loss)));
    EXPECT_TRUE(grad_matches("layer_norm dbias", db, numeric_grad(b, loss)));
    // Only what is asked for is written: dx alone leaves no weight gradient behind.
    const Tensor dx2 = nan_tensor({n, c});
    ref.layer_norm_bwd({x, w, mean, rstd, cot, dx2, ops::TensorView(), ops::TensorView()});
    EXPECT_TRUE(grad_matches("layer_norm dx alone", dx2, dx));
  }
}

// q [B, H, Tq, D] as a permuted [B, Tq, H, D] tensor (the layout a fused QKV projection gives).
Tensor heads(int64_t b, int64_t h, int64_t t, int64_t d, uint64_t seed) {
  return random_tensor({b, t, h, d}, DType::f64, seed).permute({0, 2, 1, 3});
}

// The definition: softmax over the visible keys of scale q.k, times v.
double attention_at(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, int64_t b, int64_t h,
                    int64_t i, int64_t d) {
  const int64_t tq = q.size(2), tk = k.size(2), D = q.size(3);
  std::vector<double> s;
  for (int64_t j = 0; j < tk; ++j) {
    if (causal && j > i + tk - tq) break;
    double dot_qk = 0;
    for (int64_t e = 0; e < D; ++e) dot_qk += at(q, {b, h, i, e}) * at(k, {b, h, j, e});
    s.push_back(scale * dot_qk);
  }
  double mx = -std::numeric_limits<double>::infinity(), sum = 0, out = 0;
  for (double x : s) mx = std::max(mx, x);
  for (double x : s) sum += std::exp(x - mx);
  for (size_t j = 0; j < s.size(); ++j) out += std::exp(s[j] - mx) / sum * at(v, {b, h, static_cast<int64_t>(j), d});
  return out;
}

struct AttnCase {
  int64_t b, h, tq, tk, d;
  bool causal;
};
constexpr AttnCase kAttnCases[] = {{2, 3, 5, 5, 4, true}, {1, 2, 1, 6, 3, false}, {1, 1, 3, 7, 2, true},
                                   {2, 1, 4, 4, 5, false}, {1, 2, 1, 1, 1, true}};

TEST(ReferenceTransformerOps, AttentionIsTheMaskedSoftmaxOfScaledProducts) {
  ReferenceBackend ref;
  for (const AttnCase& c : kAttnCases) {
    const Tensor q = heads(c.b, c.h, c.tq, c.d, 8), k = heads(c.b, c.h, c.tk, c.d, 9), v = heads(c.b, c.h, c.tk, c.d, 10);
    const double scale = 1 / std::sqrt(static_cast<double>(c.d));
    const Tensor y = nan_tensor({c.b, c.h, c.tq, c.d}), lse = nan_tensor({c.b, c.h, c.tq});
    ref.attention_fwd({q, k, v, y, lse, {}, scale, c.causal});
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t h = 0; h < c.h; ++h)
        for (int64_t i = 0; i < c.tq; ++i)
          for (int64_t d = 0; d < c.d; ++d)
            EXPECT_NEAR(at(y, {b, h, i, d}), attention_at(q, k, v, c.causal, scale, b, h, i, d), 1e-12)
                << "case tq=" << c.tq << " tk=" << c.tk << " causal=" << c.causal << " at " << b << h << i << d;
    // The first query of a causal square case sees only the first key: y = v_0, lse = scale q0.k0.
    if (c.causal && c.tq == c.tk) {
      for (int64_t d = 0; d < c.d; ++d) EXPECT_NEAR(at(y, {0, 0, 0, d}), at(v, {0, 0, 0, d}), 1e-14);
    }
  }
}

TEST(ReferenceTransformerOps, AttentionBackwardMatchesCentralDifferences) {
  ReferenceBackend ref;
  for (const AttnCase& c : kAttnCases) {
    const Tensor q = heads(c.b, c.h, c.tq, c.d, 11), k = heads(c.b, c.h, c.tk, c.d, 12), v = heads(c.b, c.h, c.tk, c.d, 13);
    const Tensor cot = random_tensor({c.b, c.h, c.tq, c.d}, DType::f64, 14);
    const double scale = 0.7;
    auto forward = [&] {
      const Tensor y = Tensor::empty({c.b, c.h, c.tq, c.d}, DType::f64), lse = Tensor::empty({c.b, c.h, c.tq}, DType::f64);
      ref.attention_fwd({q, k, v, y, lse, {}, scale, c.causal});
      return std::pair{y, lse};
    };
    const auto loss = [&] { return dot(forward().first, cot); };
    const auto [y, lse] = forward();
    const Tensor dq = nan_tensor(q.sizes()), dk = nan_tensor(k.sizes()), dv = nan_tensor(v.sizes()),
                 delta = nan_tensor(lse.sizes());
    ref.attention_bwd({q, k, v, y, lse, cot, delta, dq, dk, dv, {}, scale, c.causal});
    EXPECT_TRUE(grad_matches("attention dq", dq, numeric_grad(q, loss)));
    EXPECT_TRUE(grad_matches("attention dk", dk, numeric_grad(k, loss)));
    EXPECT_TRUE(grad_matches("attention dv", dv, numeric_grad(v, loss)));
  }
}

// A static cache: with kv_len = L, attention over k's and v's first L rows, whatever the rest
// holds; the rows past L get no gradient.
TEST(ReferenceTransformerOps, KvLenLimitsTheKeysToACachesFill) {
  ReferenceBackend ref;
  const int64_t tmax = 9;
  for (const auto& [tq, l, causal] : {std::tuple{1, 5, true}, std::tuple{3, 6, true}, std::tuple{2, 4, false}}) {
    const Tensor q = heads(1, 2, tq, 3, 30), k = heads(1, 2, tmax, 3, 31), v = heads(1, 2, tmax, 3, 32);
    const Tensor len = Tensor::from_vector<int64_t>({l}, {1});
    const Tensor y = nan_tensor({1, 2, tq, 3}), lse = nan_tensor({1, 2, tq});
    ref.attention_fwd({q, k, v, y, lse, len, 0.5, causal});
    const Tensor kl = k.narrow(2, 0, l), vl = v.narrow(2, 0, l);
    const Tensor y2 = nan_tensor({1, 2, tq, 3}), lse2 = nan_tensor({1, 2, tq});
    ref.attention_fwd({q, kl, vl, y2, lse2, {}, 0.5, causal});
    EXPECT_TRUE(close(y, y2, 0.0)) << "tq " << tq << " L " << l;
    const Tensor cot = random_tensor({1, 2, tq, 3}, DType::f64, 33);
    const Tensor dq = nan_tensor(q.sizes()), dk = nan_tensor(k.sizes()), dv = nan_tensor(v.sizes()),
                 delta = nan_tensor(lse.sizes());
    ref.attention_bwd({q, k, v, y, lse, cot, delta, dq, dk, dv, len, 0.5, causal});
    const Tensor dq2 = nan_tensor(q.sizes()), dk2 = nan_tensor(kl.sizes()), dv2 = nan_tensor(vl.sizes());
    ref.attention_bwd({q, kl, vl, y2, lse2, cot, delta, dq2, dk2, dv2, {}, 0.5, causal});
    EXPECT_TRUE(close(dq, dq2, 0.0));
    EXPECT_TRUE(close(dk.narrow(2, 0, l), dk2, 0.0));
    EXPECT_TRUE(close(dv.narrow(2, 0, l), dv2, 0.0));
    EXPECT_EQ(dot(dk.narrow(2, l, tmax - l), dk.narrow(2, l, tmax - l)), 0.0);
    EXPECT_EQ(dot(dv.narrow(2, l, tmax - l), dv.narrow(2, l, tmax - l)), 0.0);
  }
}

// A decoding step's new rows (AttentionFwdArgs::k_new, v_new, positions): written into the cache
// at their positions, every other row left as it was, and the queries attending over the cache
// as if the rows had been copied in first; a position outside the cache writes nothing.
TEST(ReferenceTransformerOps, NewRowsAreWrittenIntoTheCacheBeforeTheQueriesAttend) {
  ReferenceBackend ref;
  const int64_t tmax = 9;
  for (const auto& [tq, l] : {std::pair{1, 5}, std::pair{2, 7}}) {
    const Tensor k = heads(1, 2, tmax, 3, 40), v = heads(1, 2, tmax, 3, 41);  // rows past l: stale values
    const Tensor q = heads(1, 2, tq, 3, 42), kn = heads(1, 2, tq, 3, 43), vn = heads(1, 2, tq, 3, 44);
    std::vector<int64_t> at;
    for (int64_t t = 0; t < tq; ++t) at.push_back(l - tq + t);
    const Tensor len = Tensor::from_vector<int64_t>({l}, {1}), pos = Tensor::from_vector<int64_t>(at, {tq});
    // The composed form: the rows copied in, then attention over the copy.
    const Tensor kc = k.clone(), vc = v.clone();
    for (int64_t t = 0; t < tq; ++t) {
      copy_into(kn.narrow(2, t, 1), kc.narrow(2, at[t], 1));
      copy_into(vn.narrow(2, t, 1), vc.narrow(2, at[t], 1));
    }
    const Tensor y = nan_tensor({1, 2, tq, 3}), lse = nan_tensor({1, 2, tq});
    ops::AttentionFwdArgs a{q, k, v, y, lse, len, 0.5, true};
    a.k_new = kn;
    a.v_new = vn;
    a.positions = pos;
    ref.attention_fwd(a);
    const Tensor y2 = nan_tensor({1, 2, tq, 3}), lse2 = nan_tensor({1, 2, tq});
    ref.attention_fwd({q, kc, vc, y2, lse2, len, 0.5, true});
    const std::string w = "tq " + std::to_string(tq);
    EXPECT_TRUE(close(k, kc, 0.0)) << w << ": the cache's keys";
    EXPECT_TRUE(close(v, vc, 0.0)) << w << ": the cache's values";
    EXPECT_TRUE(close(y, y2, 0.0)) << w;
    EXPECT_TRUE(close(lse, lse2, 0.0)) << w;
  }
  // Positions outside [0, Tk) on the backend call itself (the front end refuses them on the host).
  const Tensor k = heads(1, 1, 4, 2, 45), v = heads(1, 1, 4, 2, 46), kept_k = k.clone(), kept_v = v.clone();
  const Tensor q = heads(1, 1, 2, 2, 47), y = nan_tensor({1, 1, 2, 2}), lse = nan_tensor({1, 1, 2});
  ops::AttentionFwdArgs a{q, k, v, y, lse, {}, 0.5, true};
  a.k_new = heads(1, 1, 2, 2, 48);
  a.v_new = heads(1, 1, 2, 2, 49);
  a.positions = Tensor::from_vector<int64_t>({-1, 4}, {2});
  ref.attention_fwd(a);
  EXPECT_TRUE(close(k, kept_k, 0.0));
  EXPECT_TRUE(close(v, kept_v, 0.0));
}

}  // namespace
}  // namespace strata::testing
