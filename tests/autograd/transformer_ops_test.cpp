// Layer norm and scaled dot-product attention as a user calls them (strata::functional on the
// default dispatcher): values against the same computation written with the tensor API's
// composed ops, every gradient against central differences in f64, and bad arguments
// refused with the op's and the argument's names.
#include <gtest/gtest.h>

#include <cmath>

#include "strata/autograd/functions.h"
#include "strata/autograd/gradcheck.h"
#include "strata/autograd/nn_functional.h"
#include "strata/core/factories.h"
#include "support/compare.h"
#include "gradcheck_util.h"
#include "support/expect_error.h"
#include "support/random.h"

namespace strata::testing {
namespace {

// Layer norm written with the tensor API: (x - mean) / sqrt(var + eps) * w + b.
Tensor composed_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const Tensor centred = x - x.mean(-1, true);
  return centred / ((centred * centred).mean(-1, true) + eps).sqrt() * w + b;
}
// Attention written with the tensor API: the masked softmax of the scaled products, times v.
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const int64_t tq = q.size(2), tk = k.size(2);
  Tensor s = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(3))));
  if (causal) {
    std::vector<uint8_t> future(static_cast<size_t>(tq * tk));
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j) future[static_cast<size_t>(i * tk + j)] = j > i + tk - tq;
    s = s.masked_fill(Tensor::from_vector(future, Shape{tq, tk}), -INFINITY);
  }
  return s.softmax(-1).matmul(v);
}

TEST(TransformerOps, LayerNormEqualsItsComposedForm) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = random_tensor({2, 5, 7}, dt, 1, -3.0, 3.0).transpose(0, 1);  // [5, 2, 7], strided
    const Tensor w = random_tensor({7}, dt, 2), b = random_tensor({7}, dt, 3);
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    EXPECT_TRUE(close(functional::layer_norm(x, w, b, 1e-5), composed_layer_norm(x, w, b, 1e-5), tol));
    EXPECT_TRUE(close(functional::layer_norm(x), composed_layer_norm(x, ones({7}, dt), zeros({7}, dt), 1e-5), tol));
  }
}

TEST(TransformerOps, LayerNormGradients) {
  expect_gradcheck("layer_norm affine",
                   [](const Inputs& in) { return weighted(functional::layer_norm(in[0], in[1], in[2])); },
                   {leaf({3, 4, 5}, 4, -2.0, 2.0), leaf({5}, 5), leaf({5}, 6)});
  expect_gradcheck("layer_norm plain", [](const Inputs& in) { return weighted(functional::layer_norm(in[0])); },
                   {leaf({1, 6}, 7)});
  expect_gradcheck("layer_norm of a transposed input, weight only",
                   [](const Inputs& in) { return weighted(functional::layer_norm(in[0].transpose(0, 1), in[1])); },
                   {leaf({4, 3}, 8), leaf({4}, 9)});
}

struct AttnCase {
  int64_t b, h, tq, tk, d;
  bool causal;
};
constexpr AttnCase kCases[] = {{2, 3, 5, 5, 4, true}, {1, 2, 1, 6, 3, true}, {1, 1, 3, 7, 2, true},
                               {2, 1, 4, 6, 5, false}, {1, 1, 1, 1, 1, true}};

TEST(TransformerOps, AttentionEqualsItsComposedForm) {
  for (DType dt : {DType::f32, DType::f64})
    for (const AttnCase& c : kCases) {
      const Tensor q = random_tensor({c.b, c.tq, c.h, c.d}, dt, 10).transpose(1, 2);
      const Tensor k = random_tensor({c.b, c.tk, c.h, c.d}, dt, 11).transpose(1, 2);
      const Tensor v = random_tensor({c.b, c.h, c.tk, c.d}, dt, 12);
      EXPECT_TRUE(close(functional::scaled_dot_product_attention(q, k, v, c.causal), composed_attention(q, k, v, c.causal),
                        dt == DType::f32 ? 1e-5 : 1e-12))
          << "tq " << c.tq << " tk " << c.tk << " causal " << c.causal << " " << dtype_name(dt);
    }
  // An explicit scale replaces 1 / sqrt(D).
  const Tensor q = random_tensor({1, 1, 2, 4}, DType::f64, 13), k = random_tensor({1, 1, 3, 4}, DType::f64, 14);
  const Tensor v = random_tensor({1, 1, 3, 4}, DType::f64, 15);
  EXPECT_TRUE(close(functional::scaled_dot_product_attention(q, k, v, false, 0.5),
                    functional::scaled_dot_product_attention(q * (0.5 * 2.0), k, v, false), 1e-12));
}

TEST(TransformerOps, AttentionGradients) {
  for (const AttnCase& c : kCases) {
    const std::string what = "attention tq " + std::to_string(c.tq) + " tk " + std::to_string(c.tk);
    expect_gradcheck(
        what.c_str(),
        [c](const Inputs& in) {
          return weighted(functional::scaled_dot_product_attention(in[0].transpose(1, 2), in[1].transpose(1, 2), in[2],
                                                                   c.causal));
        },
        {leaf({c.b, c.tq, c.h, c.d}, 20), leaf({c.b, c.tk, c.h, c.d}, 21), leaf({c.b, c.h, c.tk, c.d}, 22)});
  }
}

// The fused two-layer perceptron against the same computation as three recorded ops.
TEST(TransformerOps, MlpEqualsItsComposedForm) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = random_tensor({6, 5}, dt, 40).transpose(0, 1);  // [5, 6], strided
    const Tensor w1 = random_tensor({8, 6}, dt, 41), b1 = random_tensor({8}, dt, 42);
    const Tensor w2 = random_tensor({3, 8}, dt, 43), b2 = random_tensor({3}, dt, 44);
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    EXPECT_TRUE(close(functional::mlp(x, w1, b1, w2, b2),
                      functional::linear(functional::linear(x, w1, b1).gelu(true), w2, b2),
                      tol));
    EXPECT_TRUE(close(functional::mlp(x, w1, Tensor(), w2, Tensor(), ops::UnaryFn::tanh),
                      functional::linear(functional::linear(x, w1).tanh(), w2), tol));
  }
}

// The residual added in the product: as linear, then add; its gradient is dy.
TEST(TransformerOps, LinearAddAndMlpWithAResidual) {
  const Tensor x = random_tensor({5, 6}, DType::f64, 60), w = random_tensor({4, 6}, DType::f64, 61);
  const Tensor b = random_tensor({4}, DType::f64, 62), z = random_tensor({4, 5}, DType::f64, 63).transpose(0, 1);
  EXPECT_TRUE(close(functional::linear_add(x, w, b, z), functional::linear(x, w, b) + z, 1e-12));
  const Tensor w1 = random_tensor({7, 6}, DType::f64, 64), w2 = random_tensor({4, 7}, DType::f64, 65);
  EXPECT_TRUE(close(functional::mlp(x, w1, Tensor(), w2, b, ops::UnaryFn::gelu_tanh, z),
                    functional::mlp(x, w1, Tensor(), w2, b) + z, 1e-12));
  expect_gradcheck("linear_add",
                   [](const Inputs& in) { return weighted(functional::linear_add(in[0], in[1], in[2], in[3])); },
                   {leaf({3, 4}, 66), leaf({2, 4}, 67), leaf({2}, 68), leaf({3, 2}, 69)});
  expect_gradcheck("mlp with a residual",
                   [](const Inputs& in) {
                     return weighted(
                         functional::mlp(in[0], in[1], in[2], in[3], in[4], ops::UnaryFn::gelu_tanh, in[5]));
                   },
                   {leaf({3, 4}, 70), leaf({5, 4}, 71), leaf({5}, 72), leaf({2, 5}, 73), leaf({2}, 74),
                    leaf({3, 2}, 75)});
  EXPECT_STRATA_ERROR(functional::linear_add(x, w, b, random_tensor({5, 3}, DType::f64, 76)), "linear", "residual",
                      "[5,4]");
}

TEST(TransformerOps, MlpGradients) {
  expect_gradcheck("mlp gelu_tanh with biases",
                   [](const Inputs& in) { return weighted(functional::mlp(in[0], in[1], in[2], in[3], in[4])); },
                   {leaf({4, 5}, 50), leaf({7, 5}, 51), leaf({7}, 52), leaf({3, 7}, 53), leaf({3}, 54)});
  expect_gradcheck("mlp sigmoid, batch 1, no biases, transposed x",
                   [](const Inputs& in) {
                     return weighted(
                         functional::mlp(in[0].transpose(0, 1), in[1], Tensor(), in[2], Tensor(), ops::UnaryFn::sigmoid));
                   },
                   {leaf({5, 1}, 55), leaf({6, 5}, 56), leaf({2, 6}, 57)});
}

TEST(TransformerOps, BadArgumentsAreRefusedByName) {
  const Tensor x = random_tensor({2, 3}, DType::f32, 30);
  const Tensor w1 = random_tensor({4, 3}, DType::f32, 36), w2 = random_tensor({2, 4}, DType::f32, 37);
  EXPECT_STRATA_ERROR(functional::mlp(x, w1, Tensor(), w2, Tensor(), ops::UnaryFn::clamp), "linear", "clamp",
                      "parameter");
  EXPECT_STRATA_ERROR(functional::mlp(x, w2, Tensor(), w2, Tensor()), "linear", "features");
  EXPECT_STRATA_ERROR(functional::mlp(x, w1, Tensor(), w1, Tensor()), "linear", "features");
  EXPECT_STRATA_ERROR(functional::layer_norm(x, ones({4})), "layer_norm", "weight", "[3]");
  EXPECT_STRATA_ERROR(functional::layer_norm(x, ones({3}), ones({3}, DType::f64)), "layer_norm", "bias");
  EXPECT_STRATA_ERROR(functional::layer_norm(x, Tensor(), Tensor(), 0.0), "layer_norm", "eps");
  EXPECT_STRATA_ERROR(functional::layer_norm(Tensor::from_vector<int64_t>({1, 2}, {2})), "layer_norm", "input");
  const Tensor q = random_tensor({1, 2, 3, 4}, DType::f32, 31), k = random_tensor({1, 2, 5, 4}, DType::f32, 32);
  EXPECT_STRATA_ERROR(functional::scaled_dot_product_attention(x, k, k), "scaled_dot_product_attention", "query",
                      "rank");
  EXPECT_STRATA_ERROR(functional::scaled_dot_product_attention(q, random_tensor({1, 3, 5, 4}, DType::f32, 33), k),
                      "scaled_dot_product_attention", "heads");
  EXPECT_STRATA_ERROR(functional::scaled_dot_product_attention(q, random_tensor({1, 2, 5, 3}, DType::f32, 34), k),
                      "scaled_dot_product_attention", "head dims");
  EXPECT_STRATA_ERROR(functional::scaled_dot_product_attention(q, k, random_tensor({1, 2, 4, 4}, DType::f32, 35)),
                      "scaled_dot_product_attention", "different lengths");
  // Causal with more queries than keys: there is no position for the first queries.
  EXPECT_STRATA_ERROR(functional::scaled_dot_product_attention(k, q, q, true), "scaled_dot_product_attention",
                      "causal", "5 queries over 3 keys");
  EXPECT_STRATA_ERROR(functional::scaled_dot_product_attention(q, k, k.to(DType::f64)), "scaled_dot_product_attention",
                      "value");
}

}  // namespace
}  // namespace strata::testing
