#include <gtest/gtest.h>

#include "strata/autograd/functions.h"
#include "strata/autograd/node.h"
#include "support/compare.h"
#include "support/op_fixtures.h"

namespace strata::testing {
namespace {

TEST(Engine, TensorUsedTwiceAccumulates) {
  auto d = reference_dispatch();
  Tensor x = random_tensor({4}, DType::f64, 1);
  x.set_requires_grad(true);
  // y = sum(relu(x) + x) -> dy/dx = [x>0] + 1
  Tensor y = autograd::sum(d, autograd::add(d, autograd::relu(d, x), x));
  autograd::backward(y);
  const auto xv = x.to_vector<double>();
  const auto g = x.grad().to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(g[i], (xv[i] > 0 ? 1.0 : 0.0) + 1.0);
}

// LeafDone: each leaf is reported once, with its gradient complete (x below gets two
// contributions, from the relu and from the add); leaves off the graph are not reported.
TEST(Engine, LeafDoneReportsEachLeafOnceItsGradientIsComplete) {
  auto d = reference_dispatch();
  Tensor x = random_tensor({4}, DType::f64, 1);
  Tensor w = random_tensor({4}, DType::f64, 4);
  Tensor unused = random_tensor({4}, DType::f64, 5);
  for (Tensor* t : {&x, &w, &unused}) t->set_requires_grad(true);
  const Tensor y = autograd::sum(d, autograd::add(d, autograd::add(d, autograd::relu(d, x), x), w));
  std::vector<const void*> reports;
  autograd::backward(y, Tensor(), [&](const Tensor& leaf) {
    reports.push_back(leaf.data_ptr());
    EXPECT_TRUE(leaf.grad().defined());
  });
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0], w.data_ptr());  // the later op runs first
  EXPECT_EQ(reports[1], x.data_ptr());
  const auto xv = x.to_vector<double>();
  const auto g = x.grad().to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(g[i], (xv[i] > 0 ? 1.0 : 0.0) + 1.0);
}

// x's report comes after both of its contributions even when one arrives late: x feeds the
// first op and, through a long chain, the last.
TEST(Engine, LeafDoneWaitsForEveryPathToTheLeaf) {
  auto d = reference_dispatch();
  Tensor x = random_tensor({3}, DType::f64, 2);
  x.set_requires_grad(true);
  Tensor h = autograd::relu(d, x);
  for (int i = 0; i < 5; ++i) h = autograd::scale(d, h, 2.0);
  const Tensor y = autograd::sum(d, autograd::add(d, h, x));
  int reports = 0;
  std::vector<double> at_report;
  autograd::backward(y, Tensor(), [&](const Tensor& leaf) {
    ++reports;
    at_report = leaf.grad().to_vector<double>();
  });
  EXPECT_EQ(reports, 1);
  EXPECT_EQ(at_report, x.grad().to_vector<double>());
}

TEST(Engine, GradAccumulatesAcrossBackwardCalls) {
  auto d = reference_dispatch();
  Tensor x = random_tensor({3}, DType::f64, 2);
  x.set_requires_grad(true);
  autograd::backward(autograd::sum(d, x));
  autograd::backward(autograd::sum(d, autograd::scale(d, x, 2.0)));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3, 3}));
}

TEST(Engine, NoGradGuardRecordsNothing) {
  auto d = reference_dispatch();
  Tensor x = random_tensor({3}, DType::f64, 3);
  x.set_requires_grad(true);
  {
    autograd::NoGradGuard g;
    Tensor y = autograd::relu(d, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE(autograd::relu(d, x).requires_grad());
}

TEST(Engine, InputsWithoutGradGetNone) {
  auto d = reference_dispatch();
  Tensor x = random_tensor({2, 3}, DType::f64, 4);
  Tensor w = random_tensor({4, 3}, DType::f64, 5);
  w.set_requires_grad(true);
  autograd::backward(autograd::sum(d, autograd::linear(d, x, w, Tensor())));
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, ErrorsAreClear) {
  auto d = reference_dispatch();
  Tensor x = random_tensor({3}, DType::f64, 6);
  EXPECT_STRATA_ERROR(autograd::backward(x), "does not require grad");
  x.set_requires_grad(true);
  EXPECT_STRATA_ERROR(autograd::backward(autograd::relu(d, x)), "not a scalar");
  Tensor scalar = random_tensor({1}, DType::f64, 7);
  scalar.set_requires_grad(true);
  EXPECT_STRATA_ERROR(autograd::backward(scalar), "leaf");
}

TEST(Engine, DeepChainDoesNotRecurse) {
  // 5000 nodes: the engine is iterative, so no stack overflow.
  auto d = reference_dispatch();
  Tensor x = random_tensor({2}, DType::f64, 7);
  x.set_requires_grad(true);
  Tensor y = x;
  for (int i = 0; i < 5000; ++i) y = autograd::scale(d, y, 1.0);
  autograd::backward(autograd::sum(d, y));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1}));
}

}  // namespace
}  // namespace strata::testing

namespace strata::testing {
namespace {

TEST(Engine, GraphsAreFreedWithTheirOutputs) {
  // A node saving its own output must not keep that output (and itself) alive.
  auto d = reference_dispatch();
  Tensor x = random_tensor({256}, DType::f32, 8);
  x.set_requires_grad(true);
  const size_t before = cpu_allocator().stats().current_bytes;
  for (int i = 0; i < 10; ++i) {
    Tensor y = autograd::max_pool2d(d, autograd::relu(d, x.view({1, 1, 16, 16})), {2, 2, 2, 2, 0, 0, true});
    (void)y;
  }
  EXPECT_EQ(cpu_allocator().stats().current_bytes, before);
}

}  // namespace
}  // namespace strata::testing
