// Bad input one level up from the ops: modules and models fed inputs with
// the wrong number of channels or features, in every dispatch mode (direct mode
// checks at plan time, not per call, so it is the one most likely to miss a change
// of shape), and backends, devices and modes this build does not have.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>

#include "strata/nn/layers/batch_norm.h"
#include "strata/nn/layers/conv2d.h"
#include "strata/nn/layers/linear.h"
#include "strata/nn/model.h"
#include "reliability_util.h"

namespace strata::testing {
namespace {

const ops::DispatchMode kModes[] = {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call,
                                    ops::DispatchMode::direct};

std::string mode_name(ops::DispatchMode m) { return std::string(ops::dispatch_mode_name(m)); }

// Parameters from a fixed seed, whatever was constructed before, so that
// comparing outputs means something.
void fill_parameters(nn::Module& m, uint64_t seed = 21) {
  for (auto& [name, t] : m.named_parameters()) copy_into(random_tensor(t.sizes(), t.dtype(), seed++), t);
}

// Runs a valid forward, the bad one (which must fail naming every one of `parts`), then
// the valid one again, which must give bitwise the first result: a failed call leaves
// no half-made plan or state behind.
template <class M>
void expect_rejected_then_usable(M& m, const Tensor& good, const Tensor& bad,
                                 std::initializer_list<const char*> parts) {
  const Tensor first = m.forward(good).clone();
  try {
    m.forward(bad);
    ADD_FAILURE() << "forward of " << bad.str() << " was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(message_contains(e.what(), parts));
  }
  Tensor again;
  ASSERT_NO_THROW(again = m.forward(good).clone());
  EXPECT_TRUE(bitwise_equal(again, first));
}

TEST(ModuleBadInput, WrongChannelsAndFeaturesInEveryMode) {
  for (ops::DispatchMode mode : kModes) {
    SCOPED_TRACE(mode_name(mode));
    nn::with_policy(mode, "reference", [&](const auto& p) {
      using P = std::decay_t<decltype(p)>;
      nn::Conv2d<P> conv(p, 3, 4, 3);
      fill_parameters(conv);
      expect_rejected_then_usable(conv, rnd({2, 3, 6, 6}), rnd({2, 5, 6, 6}), {"conv2d", "5 channels", "expects 3"});
      // A valid shape the module has not seen yet, after the error: direct mode replans.
      EXPECT_NO_THROW(conv.forward(rnd({1, 3, 5, 5})));

      nn::Linear<P> fc(p, 5, 3);
      fill_parameters(fc);
      expect_rejected_then_usable(fc, rnd({4, 5}), rnd({4, 6}), {"linear", "6 features", "expects 5"});
      expect_rejected_then_usable(fc, rnd({4, 5}), rnd({4, 5, 1}), {"linear", "input", "rank 2"});

      nn::BatchNorm2d<P> bn(p, 3);
      bn.eval();  // training would update running statistics between the calls
      expect_rejected_then_usable(bn, rnd({2, 3, 4, 4}), rnd({2, 4, 4, 4}), {"batch_norm", "[3]", "[2,4,4,4]"});
      return 0;
    });
  }
}

TEST(ModelBadInput, LeNetFedColourImagesOrTheWrongSize) {
  for (ops::DispatchMode mode : kModes) {
    SCOPED_TRACE(mode_name(mode));
    nn::LeNetConfig c;
    c.variant = nn::LeNetVariant::keras;
    auto model = nn::make_lenet(c, mode, "reference");
    model->eval();
    const Tensor good = rnd({2, 1, 28, 28});
    const Tensor first = model->predict(good).clone();
    // The model checks its input before the first layer sees it.
    EXPECT_STRATA_ERROR(model->predict(rnd({2, 3, 28, 28})), "LeNet", "[2,3,28,28]", "[N, 1, 28, 28]");
    EXPECT_STRATA_ERROR(model->predict(rnd({2, 1, 32, 32})), "LeNet", "[2,1,32,32]", "[N, 1, 28, 28]");
    EXPECT_STRATA_ERROR(model->predict(Tensor()), "undefined");
    EXPECT_TRUE(bitwise_equal(model->predict(good), first));
    // Labels that do not fit the batch, in a training step.
    auto opt = model->make_optimizer(nn::OptimizerConfig{});
    EXPECT_STRATA_ERROR(model->train_step(good, random_labels(3, 10, 1), *opt), "softmax_xent", "3 labels");
  }
}

TEST(MissingBackend, EveryNameNotBuiltIsAClearErrorListingTheBuiltOnes) {
  const auto built = backends::registry().names();
  int checked = 0;
  for (const char* name : {"cuda", "onednn", "openblas", "tpu"}) {
    if (std::find(built.begin(), built.end(), name) != built.end()) continue;
    SCOPED_TRACE(name);
    ++checked;
    try {
      backends::registry().get(name);
      ADD_FAILURE() << name << " is not built but get() returned it";
    } catch (const Error& e) {
      // Compiled in but without a device here (CUDA without a GPU) says why instead.
      const bool compiled_in = backends::registry().describe().find(name) != std::string::npos;
      if (compiled_in)
        EXPECT_TRUE(message_contains(e.what(), {name, "unavailable"})) << "the message says why it is unusable";
      else
        EXPECT_TRUE(message_contains(e.what(), {name, "reference"})) << "the message lists the built backends";
    }
    for (ops::DispatchMode mode : kModes) {
      EXPECT_STRATA_ERROR(nn::make_lenet(nn::LeNetConfig{}, mode, name), name);
      EXPECT_STRATA_ERROR(nn::make_step_kernels(mode, name), name);
    }
  }
  EXPECT_GT(checked, 0) << "'tpu' at least is never built";
  // Still usable: the reference backend answers.
  EXPECT_EQ(ops::sum(reference_dispatch(), Tensor::from_vector(std::vector<float>{1, 2}, {2})).item(), 3.0);
}

TEST(MissingBackend, CudaTensorsWithoutTheCudaBackend) {
  if (backends::registry().find("cuda")) GTEST_SKIP() << "the cuda backend is available here";
  EXPECT_STRATA_ERROR(Tensor::empty({4}, DType::f32, Device::cuda(0)), "cuda:0", "without the cuda backend");
  EXPECT_STRATA_ERROR(copy_into(rnd({4}), fake_device(rnd({4}))), "copy", "cuda");
  EXPECT_STRATA_ERROR(parse_device("gpu"), "'gpu'", "cpu", "cuda");
  EXPECT_STRATA_ERROR(parse_device("cuda:x"), "cuda:x");
  EXPECT_STRATA_ERROR(ops::parse_dispatch_mode("eager"), "'eager'", "virtual", "static", "direct");
  EXPECT_EQ(rnd({4}).clone().numel(), 4);
}

}  // namespace
}  // namespace strata::testing
