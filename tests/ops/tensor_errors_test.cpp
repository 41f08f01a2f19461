// The tensor API's ops refuse bad input with the op's name, the argument and what is wrong:
// shapes that do not broadcast, dims out of range, integer tensors where floats are needed,
// indices out of range, operands on another device.
#include <gtest/gtest.h>

#include "strata/autograd/functions.h"
#include "strata/ops/transformer_ops.h"
#include "support/op_fixtures.h"

namespace strata::testing {
namespace {

STRATA_COVERS(compare, "errors");
STRATA_COVERS(where, "errors");
STRATA_COVERS(reduce_dims, "errors");
STRATA_COVERS(softmax_fwd, "errors");
STRATA_COVERS(softmax_bwd, "errors");
STRATA_COVERS(bmm, "errors");
STRATA_COVERS(index_select, "errors");
STRATA_COVERS(index_add, "errors");
STRATA_COVERS(layer_norm_fwd, "errors");
STRATA_COVERS(layer_norm_bwd, "errors");
STRATA_COVERS(attention_fwd, "errors");
STRATA_COVERS(attention_bwd, "errors");

TEST(OpErrors, Comparisons) {
  auto d = reference_dispatch();
  EXPECT_STRATA_ERROR(ops::eq(d, rnd({2, 3}), rnd({4, 3})), "eq", "[2,3]", "[4,3]", "do not broadcast");
  EXPECT_STRATA_ERROR(ops::lt(d, rnd({2, 3}), rnd({2, 3}, DType::f64)), "lt", "dtype");
  EXPECT_STRATA_ERROR(ops::ge(d, rnd({2, 3}), Tensor()), "ge", "b", "undefined");
  EXPECT_STRATA_ERROR(ops::ne(d, fake_cuda({3}), fake_cuda({3})), "ne", "cuda:0");
}

TEST(OpErrors, Where) {
  auto d = reference_dispatch();
  const Tensor c = Tensor::empty({2, 3}, DType::u8);
  EXPECT_STRATA_ERROR(ops::where(d, rnd({2, 3}), rnd({2, 3}), rnd({2, 3})), "where", "condition", "u8");
  EXPECT_STRATA_ERROR(ops::where(d, c, rnd({2, 3}), rnd({5, 3})), "where", "[5,3]", "do not broadcast");
  EXPECT_STRATA_ERROR(ops::where(d, c, Tensor::empty({2, 3}, DType::i64), Tensor::empty({2, 3}, DType::i64)),
                      "where", "a");
}

TEST(OpErrors, Reductions) {
  auto d = reference_dispatch();
  const Tensor x = rnd({2, 3});
  const int two[] = {2}, twice[] = {1, -1}, both[] = {0, 1};
  EXPECT_STRATA_ERROR(ops::reduce(d, ops::ReduceFn::sum, x, two, false), "sum", "dim 2", "rank 2");
  EXPECT_STRATA_ERROR(ops::reduce(d, ops::ReduceFn::mean, x, twice, false), "mean", "dim 1", "more than once");
  EXPECT_STRATA_ERROR(ops::reduce(d, ops::ReduceFn::argmax, x, both, false), "argmax", "one dim");
  EXPECT_STRATA_ERROR(ops::reduce(d, ops::ReduceFn::max, Tensor::empty({0, 3}), {}, false), "amax",
                      "no elements");
  EXPECT_STRATA_ERROR(ops::reduce(d, ops::ReduceFn::sum, Tensor::empty({2}, DType::i64), {}, false), "sum",
                      "input");
}

TEST(OpErrors, Softmax) {
  auto d = reference_dispatch();
  const Tensor x = rnd({2, 3});
  EXPECT_STRATA_ERROR(ops::softmax(d, x, 2), "softmax", "dim 2");
  EXPECT_STRATA_ERROR(ops::softmax(d, x, -3, true), "log_softmax", "dim -3");
  EXPECT_STRATA_ERROR(ops::softmax(d, Tensor::empty({3}, DType::i32), 0), "softmax", "input");
  EXPECT_STRATA_ERROR(ops::softmax_bwd(d, x, rnd({3, 2}), 1), "softmax_bwd", "grad_output", "shape");
}

TEST(OpErrors, BatchedProducts) {
  auto d = reference_dispatch();
  EXPECT_STRATA_ERROR(ops::bmm(d, rnd({2, 3, 4}), rnd({2, 5, 6})), "bmm", "cannot be multiplied", "4", "5");
  EXPECT_STRATA_ERROR(ops::bmm(d, rnd({2, 3, 4}), rnd({3, 4, 6})), "bmm", "batch");
  EXPECT_STRATA_ERROR(ops::bmm(d, rnd({3, 4}), rnd({2, 4, 6})), "bmm", "a", "rank 3");
  EXPECT_STRATA_ERROR(autograd::matmul(d, rnd({2, 3}), rnd({4, 2})), "matmul", "[2,3]", "[4,2]",
                      "cannot be multiplied");
  EXPECT_STRATA_ERROR(autograd::matmul(d, rnd({2, 2, 3}), rnd({3, 3, 2})), "matmul", "do not broadcast");
  EXPECT_STRATA_ERROR(autograd::matmul(d, rnd({3}), Tensor::empty(Shape{})), "matmul", "at least one dim");
}

TEST(OpErrors, IndexSelectAndIndexAdd) {
  auto d = reference_dispatch();
  const Tensor x = rnd({5, 3});
  const Tensor idx = Tensor::from_vector<int64_t>({0, 5}, {2});
  EXPECT_STRATA_ERROR(ops::index_select(d, x, 0, idx), "index_select", "index", "index[1] = 5", "size 5");
  EXPECT_STRATA_ERROR(ops::index_select(d, x, 2, Tensor::from_vector<int64_t>({0}, {1})), "index_select", "dim 2");
  EXPECT_STRATA_ERROR(ops::index_select(d, x, 0, rnd({2})), "index_select", "index", "i64");
  EXPECT_STRATA_ERROR(ops::index_add(d, rnd({2, 3}), 0, idx, {5, 3}), "index_add", "index[1] = 5");
  EXPECT_STRATA_ERROR(ops::index_add(d, rnd({2, 4}), 0, Tensor::from_vector<int64_t>({0, 1}, {2}), {5, 3}),
                      "index_add", "dim 1");
}

TEST(OpErrors, LayerNorm) {
  auto d = reference_dispatch();
  const Tensor x = rnd({2, 3});
  EXPECT_STRATA_ERROR(ops::layer_norm(d, x, rnd({4}), Tensor(), 1e-5), "layer_norm", "weight", "[3]");
  EXPECT_STRATA_ERROR(ops::layer_norm(d, x, Tensor(), Tensor(), -1.0), "layer_norm", "eps");
  EXPECT_STRATA_ERROR(ops::layer_norm(d, fake_cuda({2, 3}), Tensor(), Tensor(), 1e-5), "layer_norm", "cuda:0");
  const ops::LayerNormResult r = ops::layer_norm(d, x, Tensor(), Tensor(), 1e-5);
  EXPECT_STRATA_ERROR(ops::layer_norm_bwd(d, x, Tensor(), r.mean, r.rstd, rnd({3, 2}), true, false, false),
                      "layer_norm_bwd", "grad_output");
  EXPECT_STRATA_ERROR(ops::layer_norm_bwd(d, x, Tensor(), r.mean.to(DType::f64), r.rstd, x, true, false, false),
                      "layer_norm_bwd", "mean", "f32");
  EXPECT_STRATA_ERROR(ops::layer_norm_bwd(d, x, Tensor(), rnd({3}), r.rstd, x, true, false, false),
                      "layer_norm_bwd", "mean", "2 rows");
}

// linear with a layer-norm prologue: the layer norm's and the product's own checks, named.
TEST(OpErrors, LinearNorm) {
  auto d = reference_dispatch();
  const Tensor x = rnd({2, 4}), w = rnd({3, 4}), b = rnd({3});
  EXPECT_STRATA_ERROR(ops::linear_norm(d, x, rnd({5}), Tensor(), 1e-5, w, b), "layer_norm", "weight");
  EXPECT_STRATA_ERROR(ops::linear_norm(d, x, Tensor(), Tensor(), 0.0, w, b), "layer_norm", "eps");
  EXPECT_STRATA_ERROR(ops::linear_norm(d, x, Tensor(), Tensor(), 1e-5, rnd({3, 5}), b), "linear");
  EXPECT_STRATA_ERROR(ops::linear_norm(d, x, Tensor(), Tensor(), 1e-5, w, b, ops::UnaryFn::clamp), "linear",
                      "scalar parameter");
  EXPECT_EQ(ops::linear_norm(d, x, Tensor(), Tensor(), 1e-5, w, b).sizes(), Shape({2, 3}));
}

TEST(OpErrors, Attention) {
  auto d = reference_dispatch();
  const Tensor q = rnd({1, 2, 3, 4}), k = rnd({1, 2, 5, 4});
  EXPECT_STRATA_ERROR(ops::attention(d, q, k, rnd({1, 2, 5, 3}), true, 0.5), "scaled_dot_product_attention", "head dims");
  EXPECT_STRATA_ERROR(ops::attention(d, k, q, q, true, 0.5), "scaled_dot_product_attention", "5 queries over 3 keys");
  EXPECT_STRATA_ERROR(ops::attention(d, q, k, k, true, 0.5, Tensor::from_vector<int64_t>({6}, {1})),
                      "scaled_dot_product_attention", "kv_len", "6");
  EXPECT_STRATA_ERROR(ops::attention(d, q, k, k, true, 0.5, Tensor::from_vector<int32_t>({2}, {1})),
                      "scaled_dot_product_attention", "kv_len", "i64");
  // A decoding step's new rows: all three or none, the queries' sizes, positions i64 [Tq] in the cache.
  const Tensor at = Tensor::from_vector<int64_t>({1, 2, 4}, {3});
  EXPECT_STRATA_ERROR(ops::attention(d, q, k, k, true, 0.5, Tensor(), rnd({1, 2, 3, 4}), Tensor(), at),
                      "scaled_dot_product_attention", "come together", "value_new undefined");
  EXPECT_STRATA_ERROR(ops::attention(d, q, k, k, true, 0.5, Tensor(), rnd({1, 2, 2, 4}), rnd({1, 2, 2, 4}), at),
                      "scaled_dot_product_attention", "the queries' own");
  EXPECT_STRATA_ERROR(ops::attention(d, q, k, k, true, 0.5, Tensor(), q, q, Tensor::from_vector<int32_t>({1, 2, 3}, {3})),
                      "scaled_dot_product_attention", "positions", "i64");
  EXPECT_STRATA_ERROR(ops::attention(d, q, k, k, true, 0.5, Tensor(), q, q, Tensor::from_vector<int64_t>({1, 2}, {2})),
                      "scaled_dot_product_attention", "positions", "[3]");
  EXPECT_STRATA_ERROR(ops::attention(d, q, k, k, true, 0.5, Tensor(), q, q, Tensor::from_vector<int64_t>({1, 5, 2}, {3})),
                      "scaled_dot_product_attention", "positions[1] = 5", "5 (key");
  const ops::AttentionResult r = ops::attention(d, q, k, k, true, 0.5);
  EXPECT_STRATA_ERROR(ops::attention_bwd(d, q, k, k, r.y, r.lse.to(DType::f64), r.y, true, 0.5),
                      "scaled_dot_product_attention_bwd", "lse");
  EXPECT_STRATA_ERROR(ops::attention_bwd(d, q, k, k, r.y, r.lse, rnd({1, 2, 3, 5}), true, 0.5),
                      "scaled_dot_product_attention_bwd", "grad_output");
}

}  // namespace
}  // namespace strata::testing
