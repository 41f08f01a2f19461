// The tensor API as a LibTorch user writes it: operators and methods on the default
// dispatcher, broadcasting, matmul's rules, reductions over dims, softmax, views, indexing,
// cat/stack/split, x.backward(), retain_graph and autograd::grad. Values against formulas
// written out here; every gradient against central differences in f64 (gradcheck).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "strata/autograd/default_dispatch.h"
#include "strata/autograd/functions.h"
#include "strata/autograd/gradcheck.h"
#include "strata/autograd/indexing.h"
#include "strata/autograd/nn_functional.h"
#include "strata/autograd/node.h"
#include "strata/core/factories.h"
#include "strata/ops/trace.h"
#include "gradcheck_util.h"
#include "support/expect_error.h"
#include "support/random.h"

namespace strata::testing {
namespace {

TEST(TensorApi, ArithmeticBroadcastsLikeNumPy) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor col = Tensor::from_vector<float>({10, 20}, {2, 1});
  const Tensor row = Tensor::from_vector<float>({1, 0, -1}, {3});
  EXPECT_EQ((a + col).to_vector<float>(), (std::vector<float>{11, 12, 13, 24, 25, 26}));
  EXPECT_EQ((a * row).to_vector<float>(), (std::vector<float>{1, 0, -3, 4, 0, -6}));
  EXPECT_EQ((a - 1.0).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ((2.0 * a).to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ((1.0 / a.slice(1, 0, 1)).to_vector<float>(), (std::vector<float>{1.0f, 0.25f}));
  EXPECT_EQ((-a).sizes(), a.sizes());
  EXPECT_EQ((col + row).sizes(), Shape({2, 3}));  // both broadcast
  EXPECT_STRATA_ERROR(a + Tensor::from_vector<float>({1, 2}, {2}), "add", "[2,3]", "[2]", "do not broadcast");
}

TEST(TensorApi, BroadcastGradientsSumOverTheRepeatedDims) {
  const Tensor a = leaf({2, 1, 4}, 1), b = leaf({3, 1}, 2, 0.5, 2.0), c = leaf({4}, 3);
  expect_gradcheck("add/mul/div broadcast",
                   [](const Inputs& in) { return weighted((in[0] + in[1]) * in[2] / in[1]); }, {a, b, c});
  expect_gradcheck("maximum/pow broadcast",
                   [](const Inputs& in) { return weighted(in[0].maximum(in[2]) + in[1].pow(in[2] + 2.0)); },
                   {a, b, c});
}

TEST(TensorApi, ComparisonsWhereAndMaskedFill) {
  const Tensor a = Tensor::from_vector<float>({1, 5, 3}, {3});
  const Tensor b = Tensor::from_vector<float>({2, 5, 1}, {3});
  EXPECT_EQ((a == b).to_vector<int>(), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ((a < b).to_vector<int>(), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ((a >= 3.0).to_vector<int>(), (std::vector<int>{0, 1, 1}));
  EXPECT_EQ((a == b).dtype(), DType::u8);
  EXPECT_EQ(where(a > b, a, b).to_vector<float>(), (std::vector<float>{2, 5, 3}));
  EXPECT_EQ(a.masked_fill(a > 2.0, -1.0).to_vector<float>(), (std::vector<float>{1, -1, -1}));
  const Tensor labels = Tensor::from_vector<int64_t>({2, 0, 1}, {3});
  const Tensor preds = Tensor::from_vector<int64_t>({2, 1, 1}, {3});
  EXPECT_EQ((preds == labels).to_vector<int>(), (std::vector<int>{1, 0, 1}));  // accuracy on i64
  const Tensor x = leaf({3, 4}, 4), y = leaf({3, 4}, 5);
  expect_gradcheck("where", [](const Inputs& in) { return weighted(where(in[0] > in[1], in[0] * in[0], in[1])); },
                   {x, y});
  expect_gradcheck("masked_fill", [](const Inputs& in) { return weighted(in[0].masked_fill(in[0] < 0.0, 2.0)); },
                   {x});
}

TEST(TensorApi, MatmulFollowsPyTorchsRules) {
  // [2,3] x [3,2] against the sum of products.
  const Tensor a = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(a.matmul(b).to_vector<double>(), (std::vector<double>{4, 5, 10, 11}));
  EXPECT_EQ(a.mm(b).sizes(), Shape({2, 2}));
  EXPECT_EQ(matmul(a.select(0, 0), b.select(1, 0)).item(), 1.0 + 3.0);  // 1-D . 1-D -> rank 0
  EXPECT_EQ(matmul(a.select(0, 0), b).sizes(), Shape({2}));            // 1-D x 2-D
  EXPECT_EQ(matmul(a, b.select(1, 1)).sizes(), Shape({2}));            // 2-D x 1-D
  EXPECT_EQ(matmul(random_tensor({4, 1, 2, 3}, DType::f64, 1), random_tensor({5, 3, 6}, DType::f64, 2)).sizes(),
            Shape({4, 5, 2, 6}));  // broadcast batch dims
  EXPECT_EQ(a.t().sizes(), Shape({3, 2}));
  const Tensor r = random_tensor({3, 4}, DType::f64, 3);
  const auto rr = r.matmul(r.t()).to_vector<double>();  // r r^T is symmetric
  EXPECT_DOUBLE_EQ(rr[1], rr[3]);
  // Gradients for every rank pairing and broadcast batch dims.
  const Tensor v = leaf({3}, 4), m = leaf({3, 3}, 5), bm = leaf({2, 1, 4, 3}, 6), bb = leaf({5, 3, 2}, 7);
  expect_gradcheck("vec.vec", [](const Inputs& in) { return weighted(matmul(in[0], in[0])); }, {v});
  expect_gradcheck("vec x mat / mat x vec",
                   [](const Inputs& in) { return weighted(matmul(in[0], in[1]) + matmul(in[1], in[0])); }, {v, m});
  expect_gradcheck("batched broadcast", [](const Inputs& in) { return weighted(matmul(in[0], in[1])); }, {bm, bb});
  expect_gradcheck("batched x 2-D", [](const Inputs& in) { return weighted(matmul(in[0], in[1])); }, {bm, m});
  expect_gradcheck("bmm", [](const Inputs& in) { return weighted(in[0].bmm(in[1].transpose(1, 2))); },
                   {leaf({2, 3, 4}, 8), leaf({2, 5, 4}, 9)});
}

TEST(TensorApi, ReductionsOverDimsWithKeepdim) {
  const Tensor x = Tensor::from_vector<double>({1, 4, 2, 8, 5, 7}, {2, 3});
  EXPECT_EQ(x.sum(1).to_vector<double>(), (std::vector<double>{7, 20}));
  EXPECT_EQ(x.sum(1, true).sizes(), Shape({2, 1}));
  EXPECT_EQ(x.sum().item(), 27.0);
  EXPECT_EQ(x.mean(0).to_vector<double>(), (std::vector<double>{4.5, 4.5, 4.5}));
  EXPECT_EQ(x.max(1).to_vector<double>(), (std::vector<double>{4, 8}));
  EXPECT_EQ(x.min({0, 1}).item(), 1.0);
  EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(x.argmin(0, true).sizes(), Shape({1, 3}));
  EXPECT_EQ(x.argmax().item(), 3.0);  // of the flattened tensor
  EXPECT_NEAR(x.var(1).to_vector<double>()[0], 7.0 / 3.0, 1e-12);  // {1,4,2}: mean 7/3, unbiased
  EXPECT_NEAR(x.var({}, false).item(), 37.5 / 6.0, 1e-12);  // population variance about 4.5
  const Tensor g = leaf({3, 4, 5}, 10);
  expect_gradcheck("sum/mean over dims",
                   [](const Inputs& in) { return weighted(in[0].sum({0, 2})) + weighted(in[0].mean(1, true)); }, {g});
  expect_gradcheck("amax/amin", [](const Inputs& in) { return weighted(in[0].amax(1) * in[0].amin(1)); }, {g});
  expect_gradcheck("var", [](const Inputs& in) { return weighted(in[0].var({1, 2}, true, true)); }, {g});
}

TEST(TensorApi, AmaxSplitsTheGradientAmongTies) {
  Tensor x = Tensor::from_vector<double>({3, 1, 3}, {3});
  x.set_requires_grad(true);
  x.amax().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0.5, 0, 0.5}));
}

TEST(TensorApi, SoftmaxAndLogSoftmaxOverAnyDim) {
  const Tensor x = random_tensor({3, 4}, DType::f64, 11, -3.0, 3.0);
  for (int d : {0, 1, -1}) {
    const auto s = x.softmax(d).sum(d).to_vector<double>();
    for (double v : s) EXPECT_NEAR(v, 1.0, 1e-12);
    const auto l = x.log_softmax(d).to_vector<double>(), e = x.softmax(d).log().to_vector<double>();
    for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(l[i], e[i], 1e-12);
  }
  const Tensor g = leaf({2, 3, 4}, 12);
  for (int d : {0, 1, 2})
    expect_gradcheck("softmax/log_softmax",
                     [d](const Inputs& in) { return weighted(in[0].softmax(d) + in[0].log_softmax(d)); }, {g});
}

TEST(TensorApi, ViewsAndTheirGradients) {
  const Tensor x = Tensor::from_vector<double>({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ(x.transpose(0, 1).contiguous().to_vector<double>(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(x.unsqueeze(1).sizes(), Shape({2, 1, 3}));
  EXPECT_EQ(x.unsqueeze(-1).sizes(), Shape({2, 3, 1}));
  EXPECT_EQ(x.unsqueeze(0).squeeze().sizes(), Shape({2, 3}));
  EXPECT_EQ(x.expand({4, 2, 3}).sizes(), Shape({4, 2, 3}));
  EXPECT_EQ(x.expand({4, 2, 3}).strides()[0], 0);  // a view, no copy
  EXPECT_EQ(x.flatten().sizes(), Shape({6}));
  EXPECT_EQ(x.reshape({3, -1}).sizes(), Shape({3, 2}));
  EXPECT_EQ(x.slice(1, 0, 3, 2).contiguous().to_vector<double>(), (std::vector<double>{0, 2, 3, 5}));
  EXPECT_EQ(x.slice(1, -2, 100).contiguous().to_vector<double>(), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(x.select(1, -1).to_vector<double>(), (std::vector<double>{2, 5}));
  EXPECT_EQ(x.transpose(0, 1).reshape({6}).to_vector<double>(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_STRATA_ERROR(x.transpose(0, 2), "transpose", "dim 2");
  EXPECT_STRATA_ERROR(x.expand({3, 3}), "expand", "[2,3]", "[3,3]");
  const Tensor g = leaf({2, 3, 4}, 13);
  expect_gradcheck("transpose/permute", [](const Inputs& in) {
    return weighted(in[0].transpose(0, 2).reshape({4, 6}) + in[0].permuted({2, 0, 1}).flatten(1));
  }, {g});
  expect_gradcheck("expand/unsqueeze/squeeze", [](const Inputs& in) {
    return weighted(in[0].unsqueeze(0).expand({3, 2, 3, 4}).squeeze(1 - 1).sum(0));
  }, {g});
  expect_gradcheck("slice/select", [](const Inputs& in) {
    return weighted(in[0].slice(2, 1, 4, 2) * 3.0) + weighted(in[0].select(1, 2));
  }, {g});
}

TEST(TensorApi, IndexingCatStackSplit) {
  const Tensor x = Tensor::from_vector<double>({0, 1, 2, 3, 4, 5}, {3, 2});
  const Tensor idx = Tensor::from_vector<int64_t>({2, 0, 2}, {3});
  EXPECT_EQ(x.index_select(0, idx).to_vector<double>(), (std::vector<double>{4, 5, 0, 1, 4, 5}));
  EXPECT_EQ(cat({x, x.slice(0, 0, 1)}, 0).sizes(), Shape({4, 2}));
  EXPECT_EQ(cat({x, x}, 1).to_vector<double>(), (std::vector<double>{0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5}));
  EXPECT_EQ(stack({x, x}, 1).sizes(), Shape({3, 2, 2}));
  const auto parts = split(x, 2, 0);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].sizes(), Shape({1, 2}));
  EXPECT_EQ(chunk(x, 2, 1)[1].contiguous().to_vector<double>(), (std::vector<double>{1, 3, 5}));
  EXPECT_STRATA_ERROR(cat({x, Tensor::from_vector<double>({1, 2, 3}, {1, 3})}, 0), "cat", "tensor 1", "dim 1");
  const Tensor a = leaf({3, 2}, 14), b = leaf({1, 2}, 15);
  expect_gradcheck("index_select with repeats", [&](const Inputs& in) { return weighted(in[0].index_select(0, idx)); },
                   {a});
  expect_gradcheck("cat/stack/split", [](const Inputs& in) {
    const Tensor c = cat({in[0], in[1]}, 0);
    return weighted(stack({c, c * c}, 2)) + weighted(split(c, 3, 0)[1]);
  }, {a, b});
}

TEST(TensorApi, GatherAndMaskedSelect) {
  const Tensor x = Tensor::from_vector<double>({0, 1, 2, 3, 4, 5}, {2, 3});
  const Tensor idx = Tensor::from_vector<int64_t>({2, 2, 0, 1}, {2, 2});
  EXPECT_EQ(gather(x, 1, idx).to_vector<double>(), (std::vector<double>{2, 2, 3, 4}));  // x[i][idx[i][j]]
  EXPECT_EQ(gather(x, 0, Tensor::from_vector<int64_t>({1, 0, 1}, {1, 3})).to_vector<double>(),
            (std::vector<double>{3, 1, 5}));  // x[idx[0][j]][j]
  EXPECT_EQ(masked_select(x, x > 2.5).to_vector<double>(), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(masked_select(x, Tensor::from_vector<uint8_t>({1, 0, 1}, {3})).to_vector<double>(),
            (std::vector<double>{0, 2, 3, 5}));  // the mask broadcast over the rows
  EXPECT_EQ(masked_select(x, x > 9.0).numel(), 0);
  EXPECT_STRATA_ERROR(gather(x, 1, Tensor::from_vector<int64_t>({3}, {1, 1})), "gather", "index", "value 3",
                      "size 3");
  EXPECT_STRATA_ERROR(gather(x, 1, Tensor::from_vector<int64_t>({0, 1}, {2})), "gather", "rank");
  EXPECT_STRATA_ERROR(masked_select(x, x), "masked_select", "mask", "integer");
  // scatter_add: out[i][idx[i][j]] += src[i][j], repeated positions accumulating.
  const Tensor base = Tensor::from_vector<double>({1, 1, 1, 1, 1, 1}, {2, 3});
  const Tensor src = Tensor::from_vector<double>({10, 20, 30, 40, 50, 60}, {2, 3});
  EXPECT_EQ(scatter_add(base, 1, idx, src).to_vector<double>(), (std::vector<double>{1, 1, 31, 41, 51, 1}));
  EXPECT_STRATA_ERROR(scatter_add(base, 1, Tensor::from_vector<int64_t>({5}, {1, 1}), src), "scatter_add",
                      "value 5");
  const Tensor a = leaf({3, 4}, 20);
  expect_gradcheck("scatter_add", [&](const Inputs& in) { return weighted(scatter_add(in[0], 1, idx, in[1])); },
                   {leaf({2, 3}, 21), leaf({2, 3}, 22)});
  expect_gradcheck("gather with repeats", [&](const Inputs& in) { return weighted(gather(in[0], 1, idx)); }, {a});
  expect_gradcheck("masked_select", [](const Inputs& in) { return weighted(masked_select(in[0], in[0] > 0.0)); },
                   {a});
}

TEST(TensorApi, BackwardAsAMethodRetainGraphAndGrad) {
  Tensor w = Tensor::from_vector<double>({1, 2, 3}, {3});
  w.set_requires_grad(true);
  const Tensor loss = (w * w).sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{2, 4, 6}));
  loss.backward();  // the retained graph runs again; gradients accumulate
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{4, 8, 12}));
  EXPECT_STRATA_ERROR(loss.backward(), "backward through the graph a second time", "retain_graph");
  // autograd::grad returns the gradient and leaves .grad() alone.
  Tensor u = Tensor::from_vector<double>({1, -1}, {2});
  u.set_requires_grad(true);
  const Tensor out = (u * u * u).sum() + (w * 0.0).sum();
  const auto g = autograd::grad(out, {u});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{3, 3}));
  EXPECT_FALSE(u.grad().defined());
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{4, 8, 12}));  // another leaf: untouched
  EXPECT_STRATA_ERROR(autograd::grad(out, {u}, Tensor(), false, true), "create_graph");
}

TEST(TensorApi, TheDefaultDispatcherIsTheBestBackendThatRunsTheDtype) {
  const auto& d = autograd::default_dispatch(Device::cpu(), DType::f32);
  EXPECT_EQ(d.backend_name(), backends::registry().best(DeviceType::cpu));
  EXPECT_EQ(&d, &autograd::default_dispatch(Device::cpu(), DType::f32));  // chosen once
  // f64 on a backend that runs every op in f64 (onednn's primitives are f32 and bf16).
  const auto& d64 = autograd::default_dispatch(Device::cpu(), DType::f64);
  for (int i = 0; i < ops::kNumOps; ++i)
    EXPECT_TRUE(d64.capabilities().supports(static_cast<ops::OpId>(i), DType::f64))
        << d64.backend_name() << " " << ops::op_name(static_cast<ops::OpId>(i));
}

// Every op of the table that the tensor API stands on is reached from methods, operators and
// free functions alone, through the default dispatcher, forward and backward (seen in the op
// trace, which records each backend call). The rest of the table (convolution, batch norm,
// pooling, the losses, dropout, the optimizer steps) is reached through nn's layers.
TEST(TensorApi, MethodsReachTheirOpsOnTheDefaultDispatcher) {
  using ops::OpId;
  ops::take_trace();
  ops::set_trace_enabled(true);
  {
    Tensor a = random_tensor({3, 4}, DType::f32, 30), b = random_tensor({4}, DType::f32, 31);
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    const Tensor idx = Tensor::from_vector<int64_t>({2, 0}, {2});
    const Tensor h = (a * b - b / 2.0 + a.exp()).relu();
    const Tensor s = h.softmax(1).sum(1) + h.amax(1) + h.matmul(b) * 3.0;
    const Tensor c = cat({s, h.index_select(0, idx).mean(1)}, 0);
    const Tensor loss = where(c > 0.0, c, -c).sum();
    loss.backward();
    EXPECT_EQ(h.argmax(1).dtype(), DType::i64);
  }
  ops::set_trace_enabled(false);
  std::set<OpId> seen;
  for (const ops::TraceEvent& e : ops::take_trace()) seen.insert(e.op);
  for (OpId op : {OpId::unary_fwd, OpId::unary_bwd, OpId::binary_fwd, OpId::binary_bwd, OpId::add, OpId::scale,
                  OpId::relu_fwd, OpId::relu_bwd, OpId::compare, OpId::where, OpId::reduce_dims, OpId::softmax_fwd,
                  OpId::softmax_bwd, OpId::bmm, OpId::index_select, OpId::index_add, OpId::fill, OpId::copy})
    EXPECT_TRUE(seen.count(op)) << ops::op_name(op) << " was not reached";
}

// Every op of the table is reachable without a dispatcher object: the tensor API's methods and
// free functions, and strata::functional's layers, losses and optimizer steps, each on the
// default dispatcher, forward and backward (the op trace records each backend call).
TEST(TensorApi, EveryOpOfTheTableIsReachableWithoutADispatcher) {
  using ops::OpId;
  auto param = [](const Shape& s, uint64_t seed) {
    Tensor t = random_tensor(s, DType::f32, seed);
    t.set_requires_grad(true);
    return t;
  };
  ops::take_trace();
  ops::set_trace_enabled(true);
  {
    // The tensor API.
    const Tensor a = param({3, 4}, 30), b = param({4}, 31);
    const Tensor h = (a * b - b / 2.0 + a.exp()).relu();
    const Tensor s = h.softmax(1).sum(1) + h.amax(1) + h.matmul(b) * 3.0;
    const Tensor c = cat({s, h.index_select(0, Tensor::from_vector<int64_t>({2, 0}, {2})).mean(1)}, 0);
    (where(c > 0.0, c, -c).sum() + h.mean()).backward();
    EXPECT_EQ(h.argmax(1).sizes(), Shape({3}));
    // The transformer's fused ops.
    const Tensor t = param({1, 2, 3, 4}, 32);
    const Tensor n = functional::layer_norm(t, param({4}, 33), param({4}, 34));
    functional::scaled_dot_product_attention(n, n, t, /*is_causal=*/true).sum().backward();
    // nn's layers, losses and optimizer steps as functions.
    const Tensor x = param({2, 3, 6, 6}, 40), w = param({4, 3, 3, 3}, 41), bias = param({4}, 42);
    const Tensor gamma = param({4}, 43), beta = param({4}, 44), rm = zeros({4}), rv = ones({4});
    Tensor y = functional::conv2d(x, w, bias, {.pad_h = 1, .pad_w = 1});
    y = functional::batch_norm(y, gamma, beta, rm, rv, /*training=*/true);
    const ops::Pool2dParams pp;
    const Tensor g = functional::global_avg_pool(functional::max_pool2d(y, pp) + functional::avg_pool2d(y, pp));
    const Tensor blocks = functional::space_to_depth(y, {});
    const Tensor logits = functional::dropout(functional::linear(g, param({3, 4}, 45), param({3}, 46)), 0.5, 7);
    const Tensor labels = Tensor::from_vector<int64_t>({0, 2}, {2});
    const Tensor targets = Tensor::from_vector<float>({0, 1, 1, 0, 0, 1}, {2, 3});
    (functional::cross_entropy(logits, labels) + functional::binary_cross_entropy_with_logits(logits, targets) +
     blocks.sum() * 0.01)
        .backward();
    const Tensor p = ones({5}), grad = full({5}, 0.1), m1 = zeros({5}), m2 = zeros({5});
    functional::axpy_(grad, p, -0.5);
    functional::sgd_step_(p, grad, m1, {.lr = 0.1, .momentum = 0.9});
    functional::adam_step_(p, grad, m1, m2, {}, 1);
    functional::rmsprop_step_(p, grad, m1, Tensor(), Tensor(), {});
    functional::adagrad_step_(p, grad, m1, {}, 1);
    functional::adadelta_step_(p, grad, m1, m2, {});
    const std::vector<Tensor> ps{p}, gs{grad}, b1{m1}, b2{m2};
    const std::vector<int64_t> steps{2};
    functional::multi_sgd_step_(ps, gs, b1, {.lr = 0.1, .momentum = 0.9});
    functional::multi_adam_step_(ps, gs, b1, b2, steps, {});
    functional::multi_rmsprop_step_(ps, gs, b1, {}, {}, {});
    functional::multi_adagrad_step_(ps, gs, b1, steps, {});
    functional::multi_adadelta_step_(ps, gs, b1, b2, {});
    functional::amp_update_scale_(full({1}, 1.0), Tensor::from_vector<double>({65536, 0, 0, 0}, {4}));
  }
  ops::set_trace_enabled(false);
  std::set<OpId> seen;
  for (const ops::TraceEvent& e : ops::take_trace()) seen.insert(e.op);
  for (int i = 0; i < ops::kNumOps; ++i)
    EXPECT_TRUE(seen.count(static_cast<OpId>(i))) << ops::op_name(static_cast<OpId>(i)) << " was not reached";
}

TEST(TensorApi, FactoriesLikeAndConversions) {
  const Tensor x = random_tensor({2, 3}, DType::f64, 16);
  EXPECT_EQ(zeros_like(x).sum().item(), 0.0);
  EXPECT_EQ(ones_like(x).sum().item(), 6.0);
  EXPECT_EQ(full_like(x, 2.5).dtype(), DType::f64);
  EXPECT_EQ(x.to(DType::f32).dtype(), DType::f32);
  EXPECT_TRUE(x.to(Device::cpu()).same(x));
  EXPECT_EQ(x.clone().to_vector<double>(), x.to_vector<double>());
}

}  // namespace
}  // namespace strata::testing
