// Export -> import round trips on the reference backend: the imported graph computes
// bitwise the outputs of the model it was exported from, in every dispatch mode; its state
// dict has the model's names and values; folded batch norm stays within rounding of the
// kept one; the imported graph trains in direct mode as in the tape modes.
#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/nn/layers/dag.h"
#include "strata/nn/loss.h"
#include "onnx_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

// The model's output for x in eval mode, a copy (direct mode returns planned buffers).
Tensor eval_output(nn::Module& m, const Tensor& x) {
  autograd::NoGradGuard no_grad;
  m.eval();
  return m.forward(x).clone();
}

// Exports m, imports it in `mode` on the reference backend, and checks outputs bitwise and
// the state dict (names and values; num_batches_tracked is not part of ONNX).
void expect_round_trip(nn::Module& m, DispatchMode mode, const Shape& item, const Tensor& x, const std::string& what) {
  const Tensor want = eval_output(m, x);
  const std::string bytes = onnx::export_model(m, export_options(item));
  onnx::Imported imp = onnx::import_model(bytes, mode, "reference", what);
  EXPECT_EQ(imp.opset, onnx::kOpset);
  EXPECT_EQ(imp.input_sizes.size(), item.size() + 1);
  EXPECT_EQ(imp.input_sizes[0], -1) << "the batch dimension stays open";
  const Tensor got = eval_output(*imp.module, x);
  EXPECT_TRUE(bitwise_equal(got, want)) << what << " in " << ops::dispatch_mode_name(mode)
                                        << ": relative error " << relative_error(got, want);
  // A second batch size through the same imported module (the dimension is dynamic).
  const Tensor x1 = x.narrow(0, 0, 1).contiguous();
  EXPECT_TRUE(bitwise_equal(eval_output(*imp.module, x1), eval_output(m, x1))) << what << ": batch 1";

  nn::StateDict mine;
  for (auto& [n, t] : m.state_dict())
    if (!n.ends_with("num_batches_tracked")) mine.emplace_back(n, t);
  nn::StateDict theirs;
  for (auto& [n, t] : imp.module->state_dict())
    if (!n.ends_with("num_batches_tracked")) theirs.emplace_back(n, t);
  ASSERT_EQ(theirs.size(), mine.size()) << what;
  for (const auto& [n, t] : mine) {
    const Tensor* u = nn::find_entry(theirs, n);
    ASSERT_NE(u, nullptr) << what << ": the imported model has no '" << n << "'";
    EXPECT_TRUE(bitwise_equal(*u, t)) << what << ": " << n;
  }
}

TEST(OnnxRoundTrip, ResNet18EveryModeBitwise) {
  const Tensor x = random_tensor({2, 3, 32, 32}, DType::f32, 11);
  for (DispatchMode mode : kAllModes) {
    auto m = nn::make_resnet(small_resnet(18, true, 16), mode, "reference");
    randomize_batch_norm(m->module(), 5);
    expect_round_trip(m->module(), mode, {3, 32, 32}, x, "ResNet-18");
  }
}

TEST(OnnxRoundTrip, ResNet50ImageNetStemBitwise) {
  const Tensor x = random_tensor({2, 3, 64, 64}, DType::f32, 12);
  for (DispatchMode mode : {DispatchMode::virtual_call, DispatchMode::direct}) {
    auto m = nn::make_resnet(small_resnet(50, false), mode, "reference");
    randomize_batch_norm(m->module(), 6);
    expect_round_trip(m->module(), mode, {3, 64, 64}, x, "ResNet-50");
  }
}

TEST(OnnxRoundTrip, ResNet34Bitwise) {
  auto m = nn::make_resnet(small_resnet(34, true), DispatchMode::static_call, "reference");
  randomize_batch_norm(m->module(), 7);
  expect_round_trip(m->module(), DispatchMode::static_call, {3, 32, 32}, random_tensor({2, 3, 32, 32}, DType::f32, 13),
                    "ResNet-34");
}

TEST(OnnxRoundTrip, LeNetBothVariantsBitwise) {
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 14);
  for (auto variant : {nn::LeNetVariant::tensorflow, nn::LeNetVariant::keras})
    for (DispatchMode mode : kAllModes) {
      nn::LeNetConfig c;
      c.variant = variant;
      c.init.seed = 3;
      auto m = nn::make_lenet(c, mode, "reference");
      expect_round_trip(m->module(), mode, {1, 28, 28}, x, variant == nn::LeNetVariant::keras ? "LeNet keras" : "LeNet");
    }
}

std::unique_ptr<nn::Module> user_model(DispatchMode mode, std::string_view backend) {
  return nn::with_policy(mode, backend, [](const auto& p) -> std::unique_ptr<nn::Module> { return user_net(p); });
}

TEST(OnnxRoundTrip, UserSequentialEveryModeBitwise) {
  const Tensor x = random_tensor({2, 3, 16, 16}, DType::f32, 15);
  for (DispatchMode mode : kAllModes) {
    auto m = user_model(mode, "reference");
    expect_round_trip(*m, mode, {3, 16, 16}, x, "user Sequential");
  }
}

TEST(OnnxRoundTrip, OtherCpuBackendsBitwise) {
  const Tensor x = random_tensor({2, 3, 16, 16}, DType::f32, 16);
  int tried = 0;
  for (const std::string& backend : backends::registry().names()) {
    if (backend == "reference" || backend == "null" || backends::registry().get(backend).device_type() != DeviceType::cpu) continue;
    ++tried;
    auto m = user_model(DispatchMode::direct, backend);
    const Tensor want = eval_output(*m, x);
    onnx::Imported imp =
        onnx::import_model(onnx::export_model(*m, export_options({3, 16, 16})), DispatchMode::direct, backend);
    EXPECT_TRUE(bitwise_equal(eval_output(*imp.module, x), want)) << backend;
  }
  if (tried == 0) GTEST_SKIP() << "no CPU backend besides reference in this build";
}

TEST(OnnxRoundTrip, FoldedBatchNormWithinRounding) {
  const Tensor x = random_tensor({2, 3, 32, 32}, DType::f32, 17);
  auto m = nn::make_resnet(small_resnet(18, true, 16), DispatchMode::virtual_call, "reference");
  randomize_batch_norm(m->module(), 8);
  const Tensor want = eval_output(m->module(), x);
  const std::string folded = onnx::export_model(m->module(), export_options({3, 32, 32}, true));
  EXPECT_LT(folded.size(), onnx::export_model(m->module(), export_options({3, 32, 32})).size());
  onnx::Imported imp = onnx::import_model(folded, DispatchMode::virtual_call, "reference");
  const Tensor got = eval_output(*imp.module, x);
  EXPECT_TRUE(close(got, want, 1e-5)) << "folded vs kept batch norm";
  EXPECT_FALSE(bitwise_equal(got, want)) << "folding changes the rounding (else this test tests nothing)";
  const nn::StateDict sd = imp.module->state_dict();
  EXPECT_NE(nn::find_entry(sd, "conv1.bias"), nullptr) << "the folded conv gains a bias under the conv's name";
  EXPECT_NE(nn::find_entry(sd, "layer2.0.downsample.0.bias"), nullptr);
  EXPECT_EQ(nn::find_entry(sd, "bn1.running_var"), nullptr);
  for (auto& [n, mod] : imp.module->named_modules()) EXPECT_NE(mod->type_name(), "BatchNorm2d") << n;
}

TEST(OnnxRoundTrip, ImportedGraphExportsAgain) {
  const Tensor x = random_tensor({2, 3, 64, 64}, DType::f32, 18);
  auto m = nn::make_resnet(small_resnet(50, false), DispatchMode::virtual_call, "reference");
  randomize_batch_norm(m->module(), 9);
  const std::string bytes = onnx::export_model(m->module(), export_options({3, 64, 64}));
  onnx::Imported once = onnx::import_model(bytes, DispatchMode::virtual_call, "reference");
  onnx::Imported twice = onnx::import_model(onnx::export_model(*once.module, export_options({3, 64, 64})),
                                            DispatchMode::direct, "reference");
  EXPECT_TRUE(bitwise_equal(eval_output(*twice.module, x), eval_output(m->module(), x)));
}

// One training step of the imported graph: direct mode (Graph's own backward with planned
// gradient sums) against the tape.
TEST(OnnxRoundTrip, ImportedGraphTrainsInDirectModeAsTape) {
  auto src = nn::make_resnet(small_resnet(18, true), DispatchMode::virtual_call, "reference");
  randomize_batch_norm(src->module(), 10);
  const std::string bytes = onnx::export_model(src->module(), export_options({3, 16, 16}));
  const Tensor x = random_tensor({2, 3, 16, 16}, DType::f32, 19);
  const Tensor labels = random_labels(2, 10, 20);

  onnx::Imported tape = onnx::import_model(bytes, DispatchMode::virtual_call, "reference");
  tape.module->train();
  const ops::VirtualDispatch vp(backends::registry().get("reference"));
  const Tensor loss = autograd::softmax_xent(vp, tape.module->forward(x), labels);
  autograd::backward(loss);

  onnx::Imported direct = onnx::import_model(bytes, DispatchMode::direct, "reference");
  direct.module->train();
  direct.module->set_input_grad(false);
  using DirectRef = nn::Direct<backends::ReferenceBackend>;
  nn::Loss<DirectRef> xent(DirectRef(), nn::LossKind::cross_entropy);
  const Tensor dloss = xent.forward(direct.module->forward(x), labels);
  EXPECT_FALSE(direct.module->backward(xent.backward()).defined()) << "no input gradient was asked for";

  EXPECT_TRUE(bitwise_equal(loss, dloss));
  const nn::StateDict pt = tape.module->named_parameters(), pd = direct.module->named_parameters();
  ASSERT_EQ(pt.size(), pd.size());
  for (size_t i = 0; i < pt.size(); ++i) {
    ASSERT_TRUE(pd[i].second.grad().defined()) << pd[i].first;
    EXPECT_TRUE(bitwise_equal(pt[i].second.grad(), pd[i].second.grad())) << pt[i].first;
  }
}

}  // namespace
}  // namespace strata::testing
