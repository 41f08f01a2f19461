// nn::Dag: a DAG of modules. Forward equals the same layers called by hand; direct-mode
// backward equals the tape bitwise, with a value read by several steps (fan-out), a sum of
// a value with itself, a branch that does not reach the output, and the input's gradient.
#include "strata/autograd/functions.h"
#include "strata/autograd/node.h"
#include "strata/nn/layers/dag.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/loss.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

using DirectRef = nn::Direct<backends::ReferenceBackend>;

// y = L4((relu(L1 x) + L2 x) * 2), and a dead branch L3(L1 x).
template <class P>
std::unique_ptr<nn::Dag<P>> diamond(const P& p) {
  auto g = std::make_unique<nn::Dag<P>>(p);
  auto linear = [&](int64_t in, int64_t out) { return std::make_unique<nn::Linear<P>>(p, in, out); };
  const int v1 = g->add_module("l1", linear(6, 5), nn::Dag<P>::kInput);
  const int v2 = g->add_module("relu", std::make_unique<nn::ReLU<P>>(p), v1);
  const int v3 = g->add_module("l2", linear(6, 5), nn::Dag<P>::kInput);
  const int v4 = g->add_sum(v2, v3);
  const int v5 = g->add_sum(v4, v4);
  g->add_module("l3", linear(5, 2), v1);  // reaches nothing
  g->set_output(g->add_module("l4", linear(5, 3), v5));
  nn::initialize(*g, {nn::InitPolicy::pytorch_default, false, 4});
  return g;
}

TEST(NnDag, ForwardIsTheLayersCalledByHand) {
  const ops::VirtualDispatch p(backends::registry().get("reference"));
  auto g = diamond(p);
  const Tensor x = random_tensor({4, 6}, DType::f32, 1);
  const auto& kids = g->children();
  auto child = [&](size_t i) { return kids[i].second; };
  const Tensor v2 = child(1)->forward(child(0)->forward(x));
  const Tensor v4 = autograd::add(p, v2, child(2)->forward(x));
  const Tensor want = child(4)->forward(autograd::add(p, v4, v4));
  EXPECT_TRUE(bitwise_equal(g->forward(x), want));
  EXPECT_EQ(g->num_values(), 8);
  EXPECT_EQ(g->output(), 7);
  EXPECT_EQ(g->step_module(3), nullptr) << "a sum";
  EXPECT_EQ(g->step_input(4, 1), 4);
}

TEST(NnDag, DirectBackwardEqualsTapeBitwise) {
  const Tensor x0 = random_tensor({4, 6}, DType::f32, 2);
  const Tensor labels = random_labels(4, 3, 3);

  const ops::VirtualDispatch vp(backends::registry().get("reference"));
  auto tape = diamond(vp);
  Tensor x = x0.clone();
  x.set_requires_grad(true);
  const Tensor loss = autograd::softmax_xent(vp, tape->forward(x), labels);
  autograd::backward(loss);

  auto direct = diamond(DirectRef());
  nn::Loss<DirectRef> xent(DirectRef(), nn::LossKind::cross_entropy);
  const Tensor dloss = xent.forward(direct->forward(x0), labels);
  const Tensor dx = direct->backward(xent.backward());

  EXPECT_TRUE(bitwise_equal(loss, dloss));
  EXPECT_TRUE(bitwise_equal(dx, x.grad())) << "the input's gradient sums two branches";
  const nn::StateDict pt = tape->named_parameters(), pd = direct->named_parameters();
  ASSERT_EQ(pt.size(), pd.size());
  for (size_t i = 0; i < pt.size(); ++i) {
    if (pt[i].first.rfind("l3.", 0) == 0) {
      EXPECT_FALSE(pd[i].second.grad().defined()) << pd[i].first << ": off the path to the output";
      continue;
    }
    EXPECT_TRUE(bitwise_equal(pt[i].second.grad(), pd[i].second.grad())) << pt[i].first;
  }
  // A second backward pass reuses the planned sums.
  direct->zero_grad();
  xent.forward(direct->forward(x0), labels);
  EXPECT_TRUE(bitwise_equal(direct->backward(xent.backward()), x.grad()));

  direct->set_input_grad(false);
  xent.forward(direct->forward(x0), labels);
  EXPECT_FALSE(direct->backward(xent.backward()).defined());
}

TEST(NnDag, BadValuesAreErrors) {
  nn::Dag<ops::VirtualDispatch> g(ops::VirtualDispatch(backends::registry().get("reference")));
  EXPECT_STRATA_ERROR(g.add_sum(0, 1), "Dag: second summand 1 is not a value of this graph (it has 1");
  EXPECT_STRATA_ERROR(g.set_output(-1), "output value -1");
  EXPECT_STRATA_ERROR(
      g.add_module("x", std::make_unique<nn::ReLU<ops::VirtualDispatch>>(ops::VirtualDispatch(backends::registry().get("reference"))), 3),
      "input value 3");
}

}  // namespace
}  // namespace strata::testing
