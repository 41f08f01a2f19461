#include <gtest/gtest.h>

#include "support/op_fixtures.h"

namespace strata::testing {
namespace {

STRATA_COVERS(linear_fwd, "errors");
STRATA_COVERS(linear_bwd_data, "errors");
STRATA_COVERS(linear_bwd_weight, "errors");
TEST(OpErrors, Linear) {
  auto d = reference_dispatch();
  Tensor x = rnd({4, 5}), w = rnd({3, 5}), b = rnd({3});
  EXPECT_STRATA_ERROR(ops::linear(d, rnd({4, 5, 1}), w, b), "linear", "input", "rank 2");
  EXPECT_STRATA_ERROR(ops::linear(d, rnd({4, 6}), w, b), "linear", "6 features", "expects 5");
  EXPECT_STRATA_ERROR(ops::linear(d, x, w, rnd({4})), "linear", "bias");
  EXPECT_STRATA_ERROR(ops::linear(d, x, rnd({3, 5}, DType::f64), b), "linear", "dtype");
  EXPECT_STRATA_ERROR(ops::linear(d, fake_cuda({4, 5}), fake_cuda({3, 5}), Tensor()), "linear", "cuda:0");
  EXPECT_STRATA_ERROR(ops::linear_bwd_data(d, rnd({4, 2}), w), "linear_bwd_data", "grad_output");
  EXPECT_STRATA_ERROR(ops::linear_bwd_weight(d, x, rnd({3, 3}), true), "linear_bwd_weight", "batch size");
}

STRATA_COVERS(dropout_fwd, "errors");
STRATA_COVERS(dropout_bwd, "errors");
TEST(OpErrors, Dropout) {
  auto d = reference_dispatch();
  EXPECT_STRATA_ERROR(ops::dropout(d, rnd({3}), 1.0, 1, 0), "dropout", "p must be");
  EXPECT_STRATA_ERROR(ops::dropout(d, fake_cuda({3}), 0.5, 1, 0), "dropout_fwd", "cuda:0");
  EXPECT_STRATA_ERROR(ops::dropout_bwd(d, rnd({3}), Tensor::empty({3}, DType::f32), 0.5), "dropout_bwd", "mask",
                      "u8");
  EXPECT_STRATA_ERROR(ops::dropout_bwd(d, rnd({3}), Tensor::empty({4}, DType::u8), 0.5), "dropout_bwd", "shape");
}

STRATA_COVERS(softmax_xent_fwd, "errors");
STRATA_COVERS(softmax_xent_bwd, "errors");
STRATA_COVERS(bce_logits_fwd, "errors");
STRATA_COVERS(bce_logits_bwd, "errors");
TEST(OpErrors, Losses) {
  auto d = reference_dispatch();
  Tensor logits = rnd({4, 10});
  Tensor labels = random_labels(4, 10, 3);
  EXPECT_STRATA_ERROR(ops::softmax_xent(d, rnd({4, 10, 1}), labels), "softmax_xent", "logits", "rank 2");
  EXPECT_STRATA_ERROR(ops::softmax_xent(d, logits, random_labels(5, 10, 3)), "softmax_xent", "5 labels");
  EXPECT_STRATA_ERROR(ops::softmax_xent(d, logits, Tensor::empty({4}, DType::i32)), "softmax_xent", "labels", "i64");
  EXPECT_STRATA_ERROR(ops::softmax_xent(d, fake_cuda({4, 10}), labels), "softmax_xent", "cuda:0");
  const Tensor lse = ops::softmax_xent(d, logits, labels).lse;
  EXPECT_EQ(lse.sizes(), Shape{4});  // the saved state is one statistic per row, not [N, C]
  EXPECT_STRATA_ERROR(ops::softmax_xent_bwd(d, logits, lse, labels, rnd({2})), "softmax_xent_bwd", "one element");
  EXPECT_STRATA_ERROR(ops::softmax_xent_bwd(d, logits, rnd({4}, DType::f64), labels, rnd({})), "softmax_xent_bwd",
                      "lse", "f64");
  EXPECT_STRATA_ERROR(ops::softmax_xent_bwd(d, logits, rnd({5}), labels, rnd({})), "softmax_xent_bwd", "lse", "[5]",
                      "per row");
  EXPECT_STRATA_ERROR(ops::softmax_xent_bwd(d, logits, Tensor(), labels, rnd({})), "softmax_xent_bwd", "lse");
  // Label values: ignore_index or a class; anything else is named with its position.
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{0, -100, 10, 3}, {4});
  EXPECT_STRATA_ERROR(ops::softmax_xent(d, logits, bad), "softmax_xent_fwd", "argument 'labels'", "labels[2] = 10",
                      "[0, 10)", "ignore_index (-100)");
  const Tensor minus_one = Tensor::from_vector(std::vector<int64_t>{0, -1, 9, 3}, {4});
  EXPECT_STRATA_ERROR(ops::softmax_xent(d, logits, minus_one), "softmax_xent_fwd", "labels[1] = -1");
  EXPECT_NO_THROW(ops::softmax_xent(d, logits, minus_one, /*ignore_index=*/-1));
  EXPECT_STRATA_ERROR(ops::softmax_xent_bwd(d, logits, lse, bad, rnd({})), "softmax_xent_bwd", "labels[2] = 10");
  EXPECT_STRATA_ERROR(ops::bce_logits(d, logits, rnd({4, 9})), "bce_logits", "shape");
  EXPECT_STRATA_ERROR(ops::bce_logits(d, logits, rnd({4, 10}, DType::f64)), "bce_logits", "dtype");
  EXPECT_STRATA_ERROR(ops::bce_logits(d, fake_cuda({4, 10}), fake_cuda({4, 10})), "bce_logits", "cuda:0");
  EXPECT_STRATA_ERROR(ops::bce_logits_bwd(d, logits, rnd({4, 10}), rnd({3})), "bce_logits_bwd", "one element");
}

// GPT's output projection hands the loss logits that are the first V (odd) columns of rows of
// a padded length (GptConfig::vocab_multiple): the front end takes them as they are, and the
// reference's loss, log-sum-exp and gradient in f64 are those of the same values stored densely.
TEST(OpErrors, SoftmaxXentOnRowsOfAPaddedStrideIsTheDenseRows) {
  auto d = reference_dispatch();
  const int64_t n = 6, v = 11, vp = 64;
  const Tensor padded = rnd({n, vp}, DType::f64).narrow(1, 0, v), dense = padded.contiguous();
  ASSERT_EQ(padded.strides()[0], vp);
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{0, 10, -100, 3, 7, 5}, {n});
  const ops::SoftmaxXentOut a = ops::softmax_xent(d, padded, labels), b = ops::softmax_xent(d, dense, labels);
  EXPECT_EQ(a.loss.item(), b.loss.item());
  EXPECT_EQ(a.lse.to_vector<double>(), b.lse.to_vector<double>());
  const Tensor dloss = Tensor::from_vector(std::vector<double>{0.5}, Shape{});
  const Tensor da = ops::softmax_xent_bwd(d, padded, a.lse, labels, dloss);
  EXPECT_EQ(da.sizes(), (Shape{n, v}));
  EXPECT_EQ(da.contiguous().to_vector<double>(), ops::softmax_xent_bwd(d, dense, b.lse, labels, dloss).to_vector<double>());
}

STRATA_COVERS(sum, "errors");
STRATA_COVERS(mean, "errors");
STRATA_COVERS(argmax, "errors");
STRATA_COVERS(fill, "errors");
STRATA_COVERS(copy, "errors");
TEST(OpErrors, ReductionsFillCopy) {
  auto d = reference_dispatch();
  EXPECT_STRATA_ERROR(ops::sum(d, fake_cuda({3})), "sum", "cuda:0");
  EXPECT_STRATA_ERROR(ops::sum(d, Tensor::empty({3}, DType::u8)), "sum", "u8");
  EXPECT_STRATA_ERROR(ops::mean(d, rnd({0})), "mean", "empty");
  EXPECT_STRATA_ERROR(ops::argmax(d, rnd({3})), "argmax", "rank 2");
  EXPECT_STRATA_ERROR(ops::argmax(d, fake_cuda({3, 2})), "argmax", "cuda:0");
  EXPECT_STRATA_ERROR(ops::fill_(d, fake_cuda({3}), 1.0), "fill", "cuda:0");
  EXPECT_STRATA_ERROR(ops::copy_(d, rnd({3}), rnd({4})), "copy", "shape");
  EXPECT_STRATA_ERROR(ops::copy_(d, fake_cuda({3}), fake_cuda({3})), "copy", "reference");
}

STRATA_COVERS(sgd_step, "errors");
STRATA_COVERS(adam_step, "errors");
STRATA_COVERS(amp_update_scale, "errors");
STRATA_COVERS(multi_sgd_step, "errors");
STRATA_COVERS(multi_adam_step, "errors");
TEST(OpErrors, OptimizerSteps) {
  auto d = reference_dispatch();
  Tensor p = rnd({5}), g = rnd({5});
  ops::SgdOptions sgd;
  sgd.momentum = 0.9;
  EXPECT_STRATA_ERROR(ops::sgd_step_(d, p, rnd({4}), rnd({5}), sgd), "sgd_step", "grad", "shape");
  EXPECT_STRATA_ERROR(ops::sgd_step_(d, p, g, Tensor(), sgd), "sgd_step", "momentum_buf");
  EXPECT_STRATA_ERROR(ops::sgd_step_(d, p, rnd({5}, DType::f64), rnd({5}), sgd), "sgd_step", "dtype");
  EXPECT_STRATA_ERROR(ops::sgd_step_(d, fake_cuda({5}), fake_cuda({5}), fake_cuda({5}), sgd), "sgd_step", "cuda:0");
  ops::AdamOptions adam;
  EXPECT_STRATA_ERROR(ops::adam_step_(d, p, g, rnd({5}), rnd({6}), adam, 1), "adam_step", "exp_avg_sq");
  EXPECT_STRATA_ERROR(ops::adam_step_(d, p, g, rnd({5}), rnd({5}), adam, 0), "adam_step", "step");
  EXPECT_STRATA_ERROR(ops::adam_step_(d, fake_cuda({5}), fake_cuda({5}), fake_cuda({5}), fake_cuda({5}), adam, 1),
                      "adam_step", "cuda:0");
  // Lists: each entry's defect names its list and index.
  const std::vector<Tensor> ps{rnd({5}), rnd({3})}, gs{rnd({5}), rnd({3})}, bufs{rnd({5}), rnd({3})};
  EXPECT_STRATA_ERROR(ops::multi_sgd_step_(d, ps, std::vector<Tensor>{gs[0]}, bufs, sgd), "multi_sgd_step", "grads",
                      "1 entries");
  EXPECT_STRATA_ERROR(ops::multi_sgd_step_(d, ps, gs, std::vector<Tensor>{}, sgd), "multi_sgd_step", "momentum_bufs");
  EXPECT_STRATA_ERROR(ops::multi_sgd_step_(d, ps, std::vector<Tensor>{gs[0], rnd({4})}, bufs, sgd), "multi_sgd_step",
                      "grads[1]", "shape");
  EXPECT_STRATA_ERROR(ops::multi_sgd_step_(d, std::vector<Tensor>{ps[0], Tensor()}, gs, bufs, sgd), "multi_sgd_step",
                      "params[1]");
  EXPECT_STRATA_ERROR(ops::multi_sgd_step_(d, std::vector<Tensor>{fake_cuda({5})}, std::vector<Tensor>{fake_cuda({5})},
                                           std::vector<Tensor>{fake_cuda({5})}, sgd),
                      "multi_sgd_step", "params[0]", "cuda:0");
  const std::vector<int64_t> steps{1, 0};
  EXPECT_STRATA_ERROR(ops::multi_adam_step_(d, ps, gs, bufs, gs, steps, adam), "multi_adam_step", "steps[1]");
  EXPECT_STRATA_ERROR(ops::multi_adam_step_(d, ps, gs, bufs, std::vector<Tensor>{gs[0], rnd({3}, DType::f64)},
                                            std::vector<int64_t>{1, 1}, adam),
                      "multi_adam_step", "exp_avg_sqs[1]", "dtype");
  EXPECT_STRATA_ERROR(ops::multi_adam_step_(d, ps, gs, bufs, gs, std::vector<int64_t>{1}, adam), "multi_adam_step",
                      "steps", "1 entries");
  const Tensor state = Tensor::from_vector<double>({1024.0, 0.0, 0.0, 0.0}, Shape{4});
  EXPECT_STRATA_ERROR(ops::amp_update_scale_(d, rnd({5}), rnd({4})), "amp_update_scale", "state", "f64");
  EXPECT_STRATA_ERROR(ops::amp_update_scale_(d, rnd({5}), Tensor::from_vector<double>({1.0, 0.0}, Shape{2})),
                      "amp_update_scale", "state", "[4]");
  EXPECT_STRATA_ERROR(ops::amp_update_scale_(d, rnd({5, 1}), state), "amp_update_scale", "grad_sums", "rank");
  EXPECT_STRATA_ERROR(ops::amp_update_scale_(d, rnd({5}), state, 2.0, 0.0), "amp_update_scale", "backoff");
  EXPECT_STRATA_ERROR(ops::amp_update_scale_(d, rnd({5}), state, 2.0, 0.5, 0), "amp_update_scale", "interval");
}

// The in-place ops report the tensor they write (Tensor::version; copies derived from a
// parameter, folded weights, compare it), not the ones they read; a refused call writes
// nothing and reports nothing.
TEST(InPlaceOps, ReportTheirWritesAndRefusalsDoNot) {
  auto d = reference_dispatch();
  const Tensor p = rnd({5}), g = rnd({5}), buf = rnd({5}), m = rnd({5}), v = rnd({5}, DType::f32, 9);
  const auto writes = [](const Tensor& t, auto&& call) {
    const uint64_t before = t.version();
    call();
    return t.version() - before;
  };
  EXPECT_EQ(writes(p, [&] { ops::fill_(d, p, 0.5); }), 1u);
  EXPECT_EQ(writes(p, [&] { ops::axpy_(d, g, p, 2.0); }), 1u);
  EXPECT_EQ(writes(g, [&] { ops::axpy_(d, g, p, 2.0); }), 0u) << "x is only read";
  EXPECT_EQ(writes(p, [&] { ops::copy_(d, g, p); }), 1u);
  ops::SgdOptions sgd;
  sgd.momentum = 0.9;
  EXPECT_EQ(writes(p, [&] { ops::sgd_step_(d, p, g, buf, sgd); }), 1u);
  EXPECT_EQ(writes(p, [&] { ops::adam_step_(d, p, g, m, v, ops::AdamOptions{}, 1); }), 1u);
  const std::vector<Tensor> ps{p, rnd({3})}, gs{g, rnd({3})}, bufs{buf, rnd({3})};
  EXPECT_EQ(writes(ps[1], [&] { ops::multi_sgd_step_(d, ps, gs, bufs, sgd); }), 1u);
  EXPECT_EQ(writes(gs[1], [&] { ops::multi_sgd_step_(d, ps, gs, bufs, sgd); }), 0u) << "gradients are only read";
  const std::vector<Tensor> ms{m, rnd({3})}, vs{v, rnd({3}, DType::f32, 9)};
  const std::vector<int64_t> steps{2, 1};
  EXPECT_EQ(writes(ps[0], [&] { ops::multi_adam_step_(d, ps, gs, ms, vs, steps, ops::AdamOptions{}); }), 1u);
  EXPECT_EQ(writes(p, [&] {
              EXPECT_STRATA_ERROR(ops::sgd_step_(d, p, rnd({4}), buf, sgd), "sgd_step", "grad");
            }),
            0u);
}

}  // namespace
}  // namespace strata::testing
