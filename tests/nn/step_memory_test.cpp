// Direct mode's memory plan (ops/direct/step_memory.h): planned training steps,
// predictions and evaluations must be bitwise those of the static mode — a buffer
// placed over another that is still alive would change them — while the step's
// buffers share an arena smaller than their sum and the whole step peaks no higher
// than the static mode's.
#include <gtest/gtest.h>

#include "strata/autograd/grad_mode.h"
#include "strata/core/allocator.h"
#include "strata/nn/layers/batch_norm.h"
#include "strata/backends/api/registry.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/ops/direct/arena_plan.h"
#include "strata/ops/direct/plans.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"
#include "strata/ops/table/arg_views.h"
#include "strata/ops/table/op_args.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

struct Run {
  std::vector<StepOutputs> steps;  // after each train_step
  std::vector<Tensor> predictions, eval_losses;
};

// Three training steps, an evaluation and a prediction in eval mode, a training step at
// another batch size, one more at the first, a backward accumulating onto its gradients
// and a prediction: every kind of step, planned and replayed.
template <class Make>
Run train_and_evaluate(Make make, ops::DispatchMode mode, const Tensor& x, const Tensor& y, const Tensor& x2,
                       const Tensor& y2) {
  std::unique_ptr<nn::Model> m = make(mode);
  auto opt = m->make_optimizer({.lr = 0.05, .momentum = 0.9});
  Run r;
  auto train = [&](const Tensor& in, const Tensor& target) {
    r.steps.push_back(snapshot(*m, m->train_step(in, target, *opt)));
  };
  for (int s = 0; s < 3; ++s) train(x, y);
  m->eval();
  {
    autograd::NoGradGuard no_grad;
    r.eval_losses.push_back(m->forward_loss(x, y).loss.clone());
  }
  r.predictions.push_back(m->predict(x).clone());
  m->train();
  train(x2, y2);
  train(x, y);
  // Gradients accumulated onto those the planned step left in its arena (no zeroing).
  const nn::StepResult more = m->forward_loss(x, y);
  m->backward();
  r.steps.push_back(snapshot(*m, more));
  r.predictions.push_back(m->predict(x2).clone());
  return r;
}

void expect_same_runs(const Run& a, const Run& b) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) expect_bitwise(a.steps[i], b.steps[i], "step " + std::to_string(i));
  for (size_t i = 0; i < a.predictions.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a.predictions[i], b.predictions[i])) << "prediction " << i;
  for (size_t i = 0; i < a.eval_losses.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a.eval_losses[i], b.eval_losses[i])) << "evaluation " << i;
}

template <class Make>
void expect_direct_equals_static(Make make, const Tensor& x, const Tensor& y, const Tensor& x2, const Tensor& y2) {
  const Run s = train_and_evaluate(make, ops::DispatchMode::static_call, x, y, x2, y2);
  const Run d = train_and_evaluate(make, ops::DispatchMode::direct, x, y, x2, y2);
  expect_same_runs(s, d);
}

TEST(StepMemory, PlannedResNetStepsBitwiseEqualStaticMode) {
  const Tensor x = random_tensor({3, 3, 8, 8}, DType::f32, 1), y = random_labels(3, 10, 2);
  const Tensor x2 = random_tensor({2, 3, 8, 8}, DType::f32, 3), y2 = random_labels(2, 10, 4);
  expect_direct_equals_static([](auto mode) { return nn::make_resnet(tiny_resnet(18), mode, "reference"); }, x, y,
                              x2, y2);
}

TEST(StepMemory, PlannedBottleneckChannelsLastAndMixedPrecisionBitwiseEqualStaticMode) {
  const Tensor x = random_tensor({2, 3, 16, 16}, DType::f32, 11), y = random_labels(2, 10, 12);
  const Tensor x2 = random_tensor({3, 3, 16, 16}, DType::f32, 13), y2 = random_labels(3, 10, 14);
  nn::ModelOptions cl;
  cl.memory_format = MemoryFormat::channels_last;
  nn::ResNetConfig c50 = tiny_resnet(50);
  c50.small_input = false;
  expect_direct_equals_static([&](auto mode) { return nn::make_resnet(c50, mode, "reference", cl); }, x, y, x2, y2);
  // f64 master weights, f32 compute: the planned casts of activations and gradients.
  nn::ModelOptions mixed;
  mixed.compute_dtype = DType::f32;
  expect_direct_equals_static(
      [&](auto mode) { return nn::make_resnet(tiny_resnet(18, DType::f64), mode, "reference", mixed); }, x, y, x2, y2);
}

TEST(StepMemory, PlannedLeNetWithDropoutAndBceBitwiseEqualStaticMode) {
  nn::LeNetConfig keras;
  keras.variant = nn::LeNetVariant::keras;
  keras.init.seed = 7;
  keras.dropout_seed = 99;  // the recording pass must not advance the dropout offsets
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 21), y = random_labels(3, 10, 22);
  const Tensor x2 = random_tensor({2, 1, 28, 28}, DType::f32, 23), y2 = random_labels(2, 10, 24);
  expect_direct_equals_static([&](auto mode) { return nn::make_lenet(keras, mode, "reference"); }, x, y, x2, y2);

  nn::LeNetConfig tf;
  tf.input_size = 12;
  tf.num_classes = 4;
  nn::ModelOptions bce;
  bce.loss = nn::LossKind::bce_logits;
  const Tensor bx = random_tensor({2, 1, 12, 12}, DType::f32, 31), by = random_tensor({2, 4}, DType::f32, 32, 0.0, 1.0);
  const Tensor bx2 = random_tensor({3, 1, 12, 12}, DType::f32, 33), by2 = random_tensor({3, 4}, DType::f32, 34, 0.0, 1.0);
  expect_direct_equals_static([&](auto mode) { return nn::make_lenet(tf, mode, "reference", bce); }, bx, by, bx2, by2);
}

// The bytes allocated above what the model, the optimizer and the batch hold, at the
// highest point of two training steps.
template <class Make>
size_t step_peak(Make make, ops::DispatchMode mode, const Tensor& x, const Tensor& y) {
  std::unique_ptr<nn::Model> m = make(mode);
  auto opt = m->make_optimizer({.lr = 0.05, .momentum = 0.9});
  // The batch in the model's input and targets buffers, as a training loop fills them
  // (direct mode's own buffers: its copies of a caller's tensors would count against it).
  const Tensor in = m->input_buffer(x.sizes()), tg = m->targets_buffer(y.sizes());
  copy_into(x, in);
  copy_into(y, tg);
  const size_t before = cpu_allocator().stats().current_bytes;
  cpu_allocator().reset_peak();
  for (int s = 0; s < 2; ++s) m->train_step(in, tg, *opt);
  return cpu_allocator().stats().peak_bytes - before;
}

TEST(StepMemory, DirectStepSharesOneArenaAndPeaksNoHigherThanStaticMode) {
  nn::ResNetConfig c = tiny_resnet(50);
  c.small_input = false;
  auto make = [&](auto mode) { return nn::make_resnet(c, mode, "reference"); };
  const Tensor x = random_tensor({4, 3, 32, 32}, DType::f32, 41), y = random_labels(4, 10, 42);

  auto m = make(ops::DispatchMode::direct);
  EXPECT_EQ(m->step_memory().buffers, 0);
  auto opt = m->make_optimizer({});
  m->train_step(x, y, *opt);
  const ops::direct::StepMemoryStats st = m->step_memory();
  EXPECT_GT(st.buffers, 100);  // every activation and input gradient of ResNet-50
  EXPECT_GE(st.arena_bytes, st.lower_bound);
  // Buffers share the arena: it is near the bytes alive at once, well under their sum (the
  // fused batch norms leave fewer short-lived buffers to share than the separate ops did).
  EXPECT_LE(st.arena_bytes, st.lower_bound * 11 / 10) << "arena " << st.arena_bytes << ", lower bound "
                                                       << st.lower_bound;
  EXPECT_LT(st.arena_bytes, st.sum_bytes * 6 / 10) << "arena " << st.arena_bytes << " of " << st.sum_bytes << " bytes";
  // Replays plan nothing new.
  m->train_step(x, y, *opt);
  EXPECT_EQ(m->step_memory().buffers, st.buffers);

  const size_t peak_static = step_peak(make, ops::DispatchMode::static_call, x, y);
  const size_t peak_direct = step_peak(make, ops::DispatchMode::direct, x, y);
  EXPECT_LE(peak_direct, peak_static) << "direct " << peak_direct << " vs static " << peak_static << " bytes";
  std::printf("ResNet-50 (base 8) batch 4 32x32 training step on reference: peak above the model: static %zu, "
              "direct %zu bytes; direct arena %lld of %lld bytes planned, lower bound %lld\n",
              peak_static, peak_direct, static_cast<long long>(st.arena_bytes), static_cast<long long>(st.sum_bytes),
              static_cast<long long>(st.lower_bound));
}

// Labels written into the model's targets buffer are read where they are: direct mode
// copies a caller's labels into that buffer, which its peak then holds beside the caller's
// (the only bytes, with the loss's seed, by which it exceeded static mode's peak at two
// points of the GPU study's grid); written there, they take no copy and no second buffer.
TEST(StepMemory, TargetsInTheModelsBufferAreReadInPlace) {
  const Tensor x = random_tensor({4, 3, 16, 16}, DType::f32, 61), y = random_labels(4, 10, 62);
  auto run = [&](bool in_buffer, std::vector<double>& losses) {
    auto m = nn::make_resnet(tiny_resnet(18), ops::DispatchMode::direct, "reference");
    auto opt = m->make_optimizer({.lr = 0.05, .momentum = 0.9});
    const Tensor in = m->input_buffer(x.sizes());
    copy_into(x, in);
    Tensor tg = y;
    if (in_buffer) {
      tg = m->targets_buffer(y.sizes());
      EXPECT_EQ(tg.data_ptr(), m->targets_buffer(y.sizes()).data_ptr()) << "one buffer per shape";
      EXPECT_EQ(tg.dtype(), DType::i64);
      copy_into(y, tg);
    }
    const size_t before = cpu_allocator().stats().current_bytes;
    cpu_allocator().reset_peak();
    for (int s = 0; s < 2; ++s) losses.push_back(m->train_step(in, tg, *opt).loss.item());
    return cpu_allocator().stats().peak_bytes - before;
  };
  std::vector<double> copied, in_place;
  const size_t peak_copied = run(false, copied), peak_in_place = run(true, in_place);
  EXPECT_EQ(peak_copied - peak_in_place, y.nbytes()) << "the copy of the labels";
  EXPECT_EQ(copied, in_place);
}

// The loss's seed is a buffer of the step's memory, alive only around the loss's
// backward, written there each step: 1, or what the caller wrote into it (dynamic loss
// scaling's scale), which backward then starts from.
TEST(StepMemory, TheLossSeedIsWrittenEachStepInTheStepsMemory) {
  auto& impl = backends::registry().impl<backends::ReferenceBackend>();
  const Tensor logits = random_tensor({3, 5}, DType::f64, 71), labels = random_labels(3, 5, 72);
  ops::direct::StepMemory memory;
  ops::direct::SoftmaxXentPlan<backends::ReferenceBackend> loss;
  auto step = [&](bool seeded, bool plan) {
    if (plan) loss.plan(impl, logits, labels);  // the recording pass, then at the arena's offsets
    loss.forward();
    if (seeded) ops::direct::run_kernel<ops::OpId::fill>(impl, ops::FillArgs{loss.dloss, 4.0});
    loss.backward(seeded);
  };
  auto outputs = [&] { return std::vector<Tensor>{loss.dlogits}; };
  memory.run("xent", Device::cpu(), [&] { step(false, true); }, outputs);
  EXPECT_TRUE(memory.holds(loss.dloss)) << "the seed is planned with the step";
  const Tensor one = loss.dlogits.clone();
  // Something else in the seed's place between steps: the next backward writes 1 again.
  ops::direct::run_kernel<ops::OpId::fill>(impl, ops::FillArgs{loss.dloss, -7.0});
  memory.run("xent", Device::cpu(), [&] { step(false, false); }, outputs);
  EXPECT_TRUE(bitwise_equal(loss.dlogits, one));
  memory.run("xent", Device::cpu(), [&] { step(true, false); }, outputs);
  const Tensor four = ops::scale(ops::StaticDispatch<backends::ReferenceBackend>(impl), one, 4.0);
  EXPECT_TRUE(bitwise_equal(loss.dlogits, four)) << "backward starts from the seed the caller wrote";
}

// Full-size ResNet-50 training steps at points of the study's grid where each of the
// planner's plain orders left the arena 0.26-1 MiB above the bytes alive at once (8 x 32,
// 64 x 32; 6 MiB at 1024 x 32), recorded on the null backend (plans and lifetimes, no
// arithmetic) with the GPU's fused batch norms: the refined placement reaches the bound.
TEST(StepMemory, ResNet50TrainingStepsReachTheArenaLowerBound) {
  nn::ResNetConfig c;  // torchvision's ResNet-50, 1000 classes
  c.fuse_train = true;
  for (const int64_t batch : {8, 64}) {
    auto m = nn::make_resnet(c, ops::DispatchMode::direct, "null");
    auto opt = m->make_optimizer({.lr = 0.1, .momentum = 0.9});
    const Tensor x = random_tensor({batch, 3, 32, 32}, DType::f32, 51);
    m->train_step(x, random_labels(batch, 1000, 52), *opt);
    const ops::direct::StepMemoryStats st = m->step_memory();
    EXPECT_GT(st.buffers, 500) << "batch " << batch;
    EXPECT_EQ(st.arena_bytes, st.lower_bound) << "batch " << batch << ": the arena is "
                                              << st.arena_bytes - st.lower_bound << " bytes above the bound";
  }
}

// planned_grad: a parameter's gradient is written into its gradient home when the home
// fits (sizes, dtype, contiguous), else into a planned buffer, with the same values.
TEST(StepMemory, GradientsGoToTheirHomesWhenTheyFit) {
  auto plain = nn::make_resnet(tiny_resnet(18), ops::DispatchMode::direct, "reference");
  auto m = nn::make_resnet(tiny_resnet(18), ops::DispatchMode::direct, "reference");
  const nn::StateDict params = m->module().named_parameters();
  Tensor fits = params.front().second;  // conv1.weight
  Tensor wrong = params.back().second;  // fc.bias: a home of another size
  fits.set_grad_home(Tensor::empty(fits.sizes(), fits.dtype()));
  wrong.set_grad_home(Tensor::empty(Shape{wrong.numel() + 1}, wrong.dtype()));
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 5);
  const Tensor y = Tensor::from_vector(std::vector<int64_t>{1, 7}, Shape{2});
  auto opt_plain = plain->make_optimizer({});
  auto opt = m->make_optimizer({});
  for (int s = 0; s < 2; ++s) {
    const StepOutputs want = snapshot(*plain, plain->train_step(x, y, *opt_plain));
    const StepOutputs got = snapshot(*m, m->train_step(x, y, *opt));
    expect_bitwise(want, got, "gradients in their homes");
    EXPECT_TRUE(fits.grad().same(fits.grad_home()));
    EXPECT_FALSE(wrong.grad().same(wrong.grad_home()));
  }
}

TEST(StepMemory, RecordingPassLeavesHostStateAlone) {
  auto m = nn::make_resnet(tiny_resnet(18), ops::DispatchMode::direct, "reference");
  auto opt = m->make_optimizer({});
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 51), y = random_labels(2, 10, 52);
  m->train_step(x, y, *opt);  // recorded, then run
  for (auto& [name, mod] : m->module().named_modules())
    if (name == "bn1") {
      auto* bn = dynamic_cast<nn::BatchNorm2d<nn::Direct<backends::ReferenceBackend>>*>(mod);
      ASSERT_NE(bn, nullptr);
      EXPECT_EQ(bn->num_batches_tracked(), 1);
    }
}

TEST(StepMemory, BackwardAfterAForwardWithoutGradientsIsAClearError) {
  for (auto mode : kAllModes) {
    auto m = nn::make_resnet(tiny_resnet(18), mode, "reference");
    const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 61), y = random_labels(2, 10, 62);
    m->forward_loss(x, y);
    m->predict(x);
    EXPECT_STRATA_ERROR(m->backward(), "Model::backward", "gradients off");
    {
      autograd::NoGradGuard no_grad;
      m->forward_loss(x, y);
    }
    EXPECT_STRATA_ERROR(m->backward(), "Model::backward", "gradients off");
    m->forward_loss(x, y);
    m->backward();  // with gradients on again
  }
}

TEST(StepMemory, ArgumentViewsAreFoundWithoutAListPerOp) {
  ops::BatchNormFwdArgs bn;
  int views = 0;
  ops::for_each_view(bn, [&](const ops::TensorView&) { ++views; });
  EXPECT_EQ(ops::kArgMembers<ops::BatchNormFwdArgs>, 15);  // the 10 views, eps, momentum, training, relu, sync
  EXPECT_EQ(views, 10);  // x, gamma, beta, running_mean, running_var, y, save_mean, save_invstd, z, relu_mask
  const Tensor a = random_tensor({2, 3}, DType::f32, 1), b = random_tensor({2, 3}, DType::f32, 2);
  const ops::AxpyArgs axpy{a, b, 2.0};
  std::vector<const void*> seen;
  ops::for_each_view(axpy, [&](const ops::TensorView& v) { seen.push_back(v.data); });
  EXPECT_EQ(seen, (std::vector<const void*>{a.data_ptr(), b.data_ptr()}));
  ops::FillArgs fill;
  views = 0;
  ops::for_each_view(fill, [&](const ops::TensorView&) { ++views; });
  EXPECT_EQ(views, 1);
}

}  // namespace
}  // namespace strata::testing
