// Module base: names and order, train/eval, state dicts and their errors, and the
// layers composed in a Sequential (tape vs direct, bitwise).
#include <gtest/gtest.h>

#include "strata/backends/reference/reference_backend.h"
#include "strata/autograd/functions.h"
#include "strata/autograd/node.h"
#include "strata/nn/init.h"
#include "strata/nn/layers/activation.h"
#include "strata/nn/layers/batch_norm.h"
#include "strata/nn/layers/container.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/layers/pool.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

using backends::ReferenceBackend;
using Virtual = ops::VirtualDispatch;
using DirectRef = nn::Direct<ReferenceBackend>;

Virtual ref_virtual() { return Virtual(backends::registry().get("reference")); }

// conv(3->4, 3x3, pad 1) bn relu maxpool flatten linear(4*4*4 -> 5)
template <class P>
std::unique_ptr<nn::Sequential> small_net(const P& p, uint64_t seed) {
  auto s = std::make_unique<nn::Sequential>();
  nn::Conv2dOptions co;
  co.padding = 1;
  s->add(std::make_unique<nn::Conv2d<P>>(p, 3, 4, 3, co));
  s->add(std::make_unique<nn::BatchNorm2d<P>>(p, 4));
  s->add(std::make_unique<nn::ReLU<P>>(p));
  s->add(std::make_unique<nn::MaxPool2d<P>>(p, 2));
  s->add(std::make_unique<nn::Flatten<P>>(p));
  s->add(std::make_unique<nn::Linear<P>>(p, 64, 5));
  s->set_input_grad(false);
  nn::initialize(*s, {nn::InitPolicy::pytorch_default, false, seed});
  return s;
}

TEST(NnModule, StateDictNamesAndOrderFollowPyTorch) {
  auto s = small_net(ref_virtual(), 1);
  std::vector<std::string> names;
  for (auto& [n, t] : s->state_dict()) names.push_back(n);
  const std::vector<std::string> want{"0.weight",       "0.bias",       "1.weight", "1.bias", "1.running_mean",
                                      "1.running_var",  "1.num_batches_tracked", "5.weight", "5.bias"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(s->named_parameters().size(), 6u);
  EXPECT_EQ(s->num_parameters(), 4 * 3 * 9 + 4 + 4 + 4 + 5 * 64 + 5);
  const Tensor nbt = s->state_dict()[6].second;
  EXPECT_EQ(nbt.dtype(), DType::i64);
  EXPECT_EQ(nbt.dim(), 0);
  for (auto& [n, p] : s->named_parameters()) EXPECT_TRUE(p.requires_grad()) << n;
  EXPECT_NE(s->repr().find("Conv2d(3, 4, kernel_size=3, padding=1)"), std::string::npos) << s->repr();
}

TEST(NnModule, TrainEvalIsRecursive) {
  auto s = small_net(ref_virtual(), 1);
  s->eval();
  for (auto& [n, m] : s->named_modules()) EXPECT_FALSE(m->is_training()) << n;
  s->train();
  for (auto& [n, m] : s->named_modules()) EXPECT_TRUE(m->is_training()) << n;
}

TEST(NnModule, LoadStateDictRoundTripAndErrors) {
  auto a = small_net(ref_virtual(), 1);
  auto b = small_net(ref_virtual(), 2);
  nn::StateDict sd;
  for (auto& [n, t] : a->state_dict()) sd.emplace_back(n, t.clone());
  b->load_state_dict(sd);
  for (size_t i = 0; i < sd.size(); ++i) EXPECT_TRUE(bitwise_equal(b->state_dict()[i].second, sd[i].second));

  auto c = small_net(ref_virtual(), 3);
  const Tensor before = c->state_dict()[0].second.clone();
  nn::StateDict bad = sd;
  bad.erase(bad.begin() + 1);                                                // missing 0.bias
  bad.emplace_back("extra.weight", random_tensor({2}, DType::f32, 1));       // unexpected
  bad[0].second = random_tensor({4, 3, 5, 5}, DType::f32, 2);               // wrong shape
  EXPECT_STRATA_ERROR(c->load_state_dict(bad), "missing key(s): '0.bias'", "unexpected key(s): 'extra.weight'",
                      "size mismatch for 0.weight", "[4,3,5,5]", "[4,3,3,3]");
  EXPECT_TRUE(bitwise_equal(c->state_dict()[0].second, before)) << "nothing is written when loading fails";

  // Non-strict tolerates missing and unexpected entries, never wrong shapes.
  nn::StateDict partial{{"5.bias", random_tensor({5}, DType::f32, 3)}, {"other", random_tensor({1}, DType::f32, 4)}};
  c->load_state_dict(partial, false);
  EXPECT_TRUE(bitwise_equal(c->state_dict().back().second, partial[0].second));
  EXPECT_STRATA_ERROR(c->load_state_dict({{"5.bias", random_tensor({6}, DType::f32, 3)}}, false), "5.bias", "[6]");
  // Other dtypes are converted.
  c->load_state_dict({{"5.bias", random_tensor({5}, DType::f64, 5)}}, false);
  EXPECT_TRUE(close(c->state_dict().back().second, random_tensor({5}, DType::f32, 5), 1e-7));
}

TEST(NnModule, SequentialDirectBackwardEqualsTapeBitwise) {
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 9);
  const Tensor labels = random_labels(2, 5, 10);
  auto& impl = backends::registry().impl<ReferenceBackend>();

  auto tape = small_net(ref_virtual(), 4);
  Tensor loss = autograd::softmax_xent(ref_virtual(), tape->forward(x), labels);
  autograd::backward(loss);

  auto direct = small_net(DirectRef(impl), 4);
  nn::Loss<DirectRef> xent(DirectRef(impl), nn::LossKind::cross_entropy);
  const Tensor dloss = xent.forward(direct->forward(x), labels);
  EXPECT_FALSE(direct->backward(xent.backward()).defined()) << "the first layer computes no input gradient";

  EXPECT_TRUE(bitwise_equal(loss, dloss));
  auto pt = tape->named_parameters(), pd = direct->named_parameters();
  for (size_t i = 0; i < pt.size(); ++i) EXPECT_TRUE(bitwise_equal(pt[i].second.grad(), pd[i].second.grad())) << pt[i].first;
  // BN counted one training batch in both.
  EXPECT_EQ(tape->state_dict()[6].second.item(), 1.0);
  EXPECT_EQ(direct->state_dict()[6].second.item(), 1.0);
}

// conv avgpool dropout flatten linear on channels-last input: Flatten copies, Dropout
// draws the same mask in both modes.
template <class P>
std::unique_ptr<nn::Sequential> pool_net(const P& p) {
  auto s = std::make_unique<nn::Sequential>();
  nn::Conv2dOptions co;
  co.padding = 1;
  co.bias = false;
  s->add(std::make_unique<nn::Conv2d<P>>(p, 3, 4, 3, co));
  s->add(std::make_unique<nn::AvgPool2d<P>>(p, 3, 2, 1));
  s->add(std::make_unique<nn::Dropout<P>>(p, 0.3, 17));
  s->add(std::make_unique<nn::Flatten<P>>(p));
  s->add(std::make_unique<nn::Linear<P>>(p, 64, 5));
  nn::initialize(*s, {nn::InitPolicy::xavier_uniform, false, 2});
  return s;
}

TEST(NnModule, AvgPoolDropoutFlattenDirectEqualsTapeBitwise) {
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 9, -1, 1, MemoryFormat::channels_last);
  const Tensor labels = random_labels(2, 5, 10);
  auto& impl = backends::registry().impl<ReferenceBackend>();
  auto tape = pool_net(ref_virtual());
  auto direct = pool_net(DirectRef(impl));
  nn::Loss<DirectRef> xent(DirectRef(impl), nn::LossKind::cross_entropy);
  for (int step = 0; step < 2; ++step) {
    tape->zero_grad();
    direct->zero_grad();
    Tensor loss = autograd::softmax_xent(ref_virtual(), tape->forward(x), labels);
    autograd::backward(loss);
    const Tensor dloss = xent.forward(direct->forward(x), labels);
    const Tensor dx = direct->backward(xent.backward());
    EXPECT_TRUE(dx.defined()) << "the input gradient is computed unless switched off";
    EXPECT_TRUE(bitwise_equal(loss, dloss));
    auto pt = tape->named_parameters(), pd = direct->named_parameters();
    for (size_t i = 0; i < pt.size(); ++i)
      EXPECT_TRUE(bitwise_equal(pt[i].second.grad(), pd[i].second.grad())) << pt[i].first;
  }
  tape->eval();
  direct->eval();
  EXPECT_TRUE(bitwise_equal(tape->forward(x), direct->forward(x)));
}

TEST(NnModule, DirectLayerPlansPerInputAndReplansOnNewShape) {
  auto& impl = backends::registry().impl<ReferenceBackend>();
  nn::Conv2d<DirectRef> conv(DirectRef(impl), 3, 4, 3);
  nn::initialize(conv, {});
  const Tensor x = random_tensor({1, 3, 6, 6}, DType::f32, 1);
  const Tensor y1 = conv.forward(x);
  const Tensor y2 = conv.forward(x);
  EXPECT_EQ(conv.plans_made(), 1);
  EXPECT_EQ(y1.data_ptr(), y2.data_ptr()) << "a reused plan writes into its planned output";
  conv.forward(random_tensor({2, 3, 6, 6}, DType::f32, 2));
  EXPECT_EQ(conv.plans_made(), 2);
  // The same values as the front end.
  const Tensor ref = ops::conv2d(ref_virtual(), x, conv.weight(), conv.bias(), conv.conv_params());
  EXPECT_TRUE(bitwise_equal(conv.forward(x), ref));
  EXPECT_EQ(conv.plans_made(), 2) << "the first input's plan is still cached";
}

TEST(NnModule, ZeroGradAndGroupThousands) {
  auto s = small_net(ref_virtual(), 1);
  autograd::backward(autograd::softmax_xent(ref_virtual(), s->forward(random_tensor({2, 3, 8, 8}, DType::f32, 1)),
                                            random_labels(2, 5, 1)));
  for (auto& p : s->parameters()) EXPECT_TRUE(p.grad().defined());
  s->zero_grad();
  for (auto& p : s->parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_EQ(nn::group_thousands(25557032), "25,557,032");
  EXPECT_EQ(nn::group_thousands(999), "999");
}

}  // namespace
}  // namespace strata::testing
