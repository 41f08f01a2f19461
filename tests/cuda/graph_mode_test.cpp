// Graph mode on the GPU: predict and train_step captured into CUDA graphs and replayed
// must give the bits direct mode gives (the same plans, the same kernels), for every
// input written between launches, across a new shape (a second graph) and back, in f32
// NCHW and in bf16 channels-last, with a learning rate that changes every step; a
// checkpoint saved in graph mode resumes exactly, into a fresh model or into the one
// whose graphs exist; a gradient hook is captured with the step.
#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "strata/backends/cuda/context.h"
#include "strata/core/allocator.h"
#include "strata/nn/nn.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

class CudaGraphMode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_skip_reason().empty()) GTEST_SKIP() << "no usable GPU: " << gpu_skip_reason();
  }
};

nn::ResNetConfig resnet18() {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.init.seed = 3;
  return c;
}

// The predictions of a fresh model in eval mode for each input, copied to the host
// right away (a graph's output is overwritten by its next launch).
std::vector<Tensor> predictions(ops::DispatchMode mode, const std::vector<Tensor>& inputs, const nn::ModelOptions& o) {
  auto m = nn::make_resnet(resnet18(), mode, "cuda", o);
  m->eval();
  std::vector<Tensor> out;
  for (const Tensor& x : inputs) {
    const Tensor y = m->predict(x);
    Tensor host = Tensor::empty(y.sizes(), y.dtype(), Device::cpu());
    copy_into(y, host);
    out.push_back(host);
  }
  return out;
}

void expect_graph_equals_direct(const nn::ModelOptions& o) {
  std::vector<Tensor> inputs;
  for (int i = 0; i < 4; ++i) inputs.push_back(random_tensor({2, 3, 64, 64}, DType::f32, 10 + i));  // plan, capture, 2 launches
  for (int i = 0; i < 3; ++i) inputs.push_back(random_tensor({3, 3, 48, 48}, DType::f32, 20 + i));  // a second graph
  inputs.push_back(random_tensor({2, 3, 64, 64}, DType::f32, 30));  // the first again
  const std::vector<Tensor> direct = predictions(ops::DispatchMode::direct, inputs, o);
  const std::vector<Tensor> graph = predictions(ops::DispatchMode::graph, inputs, o);
  ASSERT_EQ(direct.size(), graph.size());
  for (size_t i = 0; i < direct.size(); ++i) EXPECT_TRUE(bitwise_equal(direct[i], graph[i])) << "input " << i;
  // Different inputs give different outputs through the same graph (the copy into the
  // planned input buffer runs before each launch).
  EXPECT_FALSE(bitwise_equal(graph[2], graph[3]));
}

TEST_F(CudaGraphMode, ReplaysBitwiseEqualToDirectMode) { expect_graph_equals_direct({}); }

// When a call grows the cuDNN workspace (a trainer's evaluation after its training step
// was captured), the old buffer goes back at once, as in direct mode, and graphs captured
// with it are stale: graph mode captures the step again at its next use (with direct
// mode's bits), and a stale graph refuses to launch instead of replaying a freed buffer.
TEST_F(CudaGraphMode, AGrownWorkspaceIsGivenBackAndItsGraphsCapturedAgain) {
  const std::vector<Tensor> inputs{random_tensor({2, 3, 64, 64}, DType::f32, 40),
                                   random_tensor({2, 3, 64, 64}, DType::f32, 41),
                                   random_tensor({2, 3, 64, 64}, DType::f32, 42)};
  const std::vector<Tensor> direct = predictions(ops::DispatchMode::direct, inputs, {});
  auto m = nn::make_resnet(resnet18(), ops::DispatchMode::graph, "cuda");
  m->eval();
  auto host = [](const Tensor& y) {
    Tensor h = Tensor::empty(y.sizes(), y.dtype(), Device::cpu());
    copy_into(y, h);
    return h;
  };
  Tensor y0 = host(m->predict(inputs[0]));  // planned in direct mode
  Tensor y1 = host(m->predict(inputs[1]));  // captured
  backends::cuda::Context& ctx = backends::cuda::context();
  Allocator& a = allocator_for(Device::cuda());
  const size_t old_bytes = ctx.workspace_bytes();
  ASSERT_GT(old_bytes, 0u) << "the convolutions used no workspace: nothing to replace";
  const size_t before = a.stats().current_bytes;
  ctx.workspace(old_bytes + (size_t{64} << 20));  // what a larger shape's convolution would ask
  EXPECT_EQ(a.stats().current_bytes, before - old_bytes + ctx.workspace_bytes()) << "the old workspace is given back";
  Tensor y2 = host(m->predict(inputs[2]));  // stale: captured again
  EXPECT_TRUE(bitwise_equal(direct[0], y0));
  EXPECT_TRUE(bitwise_equal(direct[1], y1));
  EXPECT_TRUE(bitwise_equal(direct[2], y2));

  backends::CudaBackend cuda;
  cuda.begin_capture();
  std::unique_ptr<backends::cuda::CudaGraph> g = cuda.end_capture();
  EXPECT_FALSE(g->stale());
  ctx.workspace(ctx.workspace_bytes() + 1);
  EXPECT_TRUE(g->stale());
  EXPECT_STRATA_ERROR(g->launch(), "cannot be launched; capture the step again");
}

TEST_F(CudaGraphMode, Bf16ChannelsLastReplaysBitwiseEqualToDirectMode) {
  nn::ModelOptions o;
  o.compute_dtype = DType::bf16;
  o.memory_format = MemoryFormat::channels_last;
  expect_graph_equals_direct(o);
}

// A model given no layout takes the backend's: NHWC where cuDNN computes on the tensor cores (bf16,
// f16, f32 with TF32), NCHW in strict f32. Its predictions from NCHW inputs are then bitwise those of
// a model asked for that layout, and its weights and input buffer are in it.
TEST_F(CudaGraphMode, AModelWithoutALayoutTakesTheBackendsChoice) {
  auto& cb = backends::registry().impl<backends::CudaBackend>();
  const bool tf32 = cb.settings().allow_tf32;
  struct Case {
    std::optional<DType> compute;
    bool tf32;
    MemoryFormat want;
  };
  const std::vector<Tensor> inputs{random_tensor({2, 3, 64, 64}, DType::f32, 50),
                                   random_tensor({2, 3, 64, 64}, DType::f32, 51),
                                   random_tensor({2, 3, 64, 64}, DType::f32, 52)};
  for (const Case& c : {Case{std::nullopt, false, MemoryFormat::contiguous},
                        Case{std::nullopt, true, MemoryFormat::channels_last},
                        Case{DType::bf16, false, MemoryFormat::channels_last},
                        Case{DType::f16, false, MemoryFormat::channels_last}}) {
    SCOPED_TRACE(::testing::Message() << (c.compute ? dtype_name(*c.compute) : "f32") << (c.tf32 ? " tf32" : ""));
    cb.set_allow_tf32(c.tf32);
    EXPECT_EQ(cb.preferred_memory_format(c.compute.value_or(DType::f32)), c.want);
    nn::ModelOptions chosen;
    chosen.compute_dtype = c.compute;
    auto m = nn::make_resnet(resnet18(), ops::DispatchMode::graph, "cuda", chosen);
    const Tensor in = m->input_buffer(Shape{2, 3, 64, 64});
    EXPECT_EQ(in.is_contiguous(), c.want == MemoryFormat::contiguous) << in.str();
    for (const auto& [name, p] : m->module().named_parameters()) {
      if (p.dim() == 4 && p.size(2) > 1) {
        EXPECT_EQ(p.is_contiguous(), c.want == MemoryFormat::contiguous) << name;
      }
    }
    nn::ModelOptions asked = chosen;
    asked.memory_format = c.want;
    const std::vector<Tensor> a = predictions(ops::DispatchMode::graph, inputs, chosen);
    const std::vector<Tensor> b = predictions(ops::DispatchMode::graph, inputs, asked);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i], b[i])) << "input " << i;
  }
  cb.set_allow_tf32(tf32);
}

// Host copies of named tensors (a graph's buffers are overwritten by its next launch).
nn::StateDict host_copies(const nn::StateDict& sd) {
  nn::StateDict out;
  for (const auto& [n, t] : sd) {
    Tensor h = Tensor::empty(t.sizes(), t.dtype(), Device::cpu());
    copy_into(t, h);
    out.emplace_back(n, h);
  }
  return out;
}

struct Batch {
  Tensor x, labels;
};
// Batches of 2, then 3 (a second graph), then 2 again (the first graph).
std::vector<Batch> batches(int n) {
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i) {
    const int64_t b = (i >= 4 && i < 7) ? 3 : 2;
    std::vector<int64_t> labels;
    for (int64_t j = 0; j < b; ++j) labels.push_back((i * 3 + j * 7) % 10);
    out.push_back({random_tensor({b, 3, 32, 32}, DType::f32, 100 + i), Tensor::from_vector(labels, Shape{b})});
  }
  return out;
}

// A learning rate that changes every step: a graph must follow it without capturing again.
double lr_at(const nn::OptimizerConfig& oc, size_t step) { return oc.lr * (1.0 + 0.25 * static_cast<double>(step % 4)); }

struct Trained {
  std::vector<Tensor> losses;
  nn::StateDict params, opt_state;
};

// Steps [from, to) of `data` on model m with optimizer opt.
void train(nn::Model& m, nn::Optimizer& opt, const nn::OptimizerConfig& oc, const std::vector<Batch>& data,
           size_t from, size_t to, Trained& out) {
  for (size_t i = from; i < to; ++i) {
    opt.set_lr(lr_at(oc, i));
    const nn::StepResult r = m.train_step(data[i].x, data[i].labels, opt);
    out.losses.push_back(host_copies({{"loss", r.loss}})[0].second);
  }
  out.params = host_copies(m.state_dict());
  out.opt_state = host_copies(opt.state_dict());
}

Trained trained(ops::DispatchMode mode, const nn::ModelOptions& o, const nn::OptimizerConfig& oc, size_t steps) {
  auto m = nn::make_resnet(resnet18(), mode, "cuda", o);
  m->train();
  auto opt = m->make_optimizer(oc);
  Trained t;
  train(*m, *opt, oc, batches(static_cast<int>(steps)), 0, steps, t);
  return t;
}

void expect_same(const Trained& a, const Trained& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_TRUE(bitwise_equal(a.losses[i], b.losses[i])) << "loss " << i;
  for (const nn::StateDict* sd : {&a.params, &b.params, &a.opt_state, &b.opt_state}) ASSERT_FALSE(sd->empty());
  for (auto [x, y] : {std::pair{&a.params, &b.params}, std::pair{&a.opt_state, &b.opt_state}}) {
    ASSERT_EQ(x->size(), y->size());
    for (size_t i = 0; i < x->size(); ++i) {
      EXPECT_EQ((*x)[i].first, (*y)[i].first);
      EXPECT_TRUE(bitwise_equal((*x)[i].second, (*y)[i].second)) << (*x)[i].first;
    }
  }
}

nn::OptimizerConfig sgd() {
  nn::OptimizerConfig oc;
  oc.lr = 0.05;
  oc.momentum = 0.9;
  oc.weight_decay = 1e-4;
  return oc;
}

nn::OptimizerConfig adamw() {
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::adamw;
  oc.lr = 1e-3;
  oc.weight_decay = 1e-2;
  return oc;
}

// RMSprop (centered, with momentum), Adagrad (lr_decay: its count read at each launch),
// Adadelta, each with weight decay.
nn::OptimizerConfig adaptive(nn::OptimizerKind kind) {
  nn::OptimizerConfig oc;
  oc.kind = kind;
  oc.lr = kind == nn::OptimizerKind::rmsprop ? 1e-3 : nn::default_lr(kind);
  oc.weight_decay = 1e-4;
  oc.rmsprop.momentum = 0.9;
  oc.rmsprop.centered = true;
  oc.adagrad.lr_decay = 0.01;
  oc.adagrad.initial_accumulator_value = 0.1;
  return oc;
}

TEST_F(CudaGraphMode, TrainStepReplaysBitwiseEqualToDirectMode) {
  const Trained direct = trained(ops::DispatchMode::direct, {}, sgd(), 9);
  const Trained graph = trained(ops::DispatchMode::graph, {}, sgd(), 9);
  expect_same(direct, graph);
  // The steps moved the weights (a test that could not fail otherwise).
  EXPECT_FALSE(bitwise_equal(graph.losses[2], graph.losses[3]));
}

// Graph mode holds no device memory direct mode does not: the learning rate and step
// counts its replays read live in pinned host memory, copied into the optimizer call's
// scratch at each launch (they were 16 bytes per parameter on the device, beside the step).
TEST_F(CudaGraphMode, TrainingHoldsTheDeviceMemoryOfDirectMode) {
  const std::vector<Batch> data = batches(4);  // all of 2 images: plan, capture, two launches
  const auto held = [&](ops::DispatchMode mode, nn::OptimizerKind kind) {
    auto m = nn::make_resnet(resnet18(), mode, "cuda", {});
    m->train();
    nn::OptimizerConfig oc = kind == nn::OptimizerKind::sgd ? sgd() : adamw();
    auto opt = m->make_optimizer(oc);
    Trained t;
    train(*m, *opt, oc, data, 0, data.size(), t);
    return allocator_for(Device::cuda()).stats().current_bytes;
  };
  for (nn::OptimizerKind kind : {nn::OptimizerKind::sgd, nn::OptimizerKind::adamw}) {
    SCOPED_TRACE(kind == nn::OptimizerKind::sgd ? "sgd" : "adamw");
    (void)held(ops::DispatchMode::direct, kind);  // the cuDNN workspace and the scratch at their size
    const size_t direct = held(ops::DispatchMode::direct, kind);
    EXPECT_EQ(held(ops::DispatchMode::graph, kind), direct);
  }
}

TEST_F(CudaGraphMode, AdaptiveOptimizersTrainStepReplaysBitwiseEqualToDirectMode) {
  for (nn::OptimizerKind kind : {nn::OptimizerKind::rmsprop, nn::OptimizerKind::adagrad, nn::OptimizerKind::adadelta}) {
    SCOPED_TRACE(nn::optimizer_kind_name(kind));
    const Trained graph = trained(ops::DispatchMode::graph, {}, adaptive(kind), 9);
    expect_same(trained(ops::DispatchMode::direct, {}, adaptive(kind), 9), graph);
    EXPECT_FALSE(bitwise_equal(graph.losses[2], graph.losses[3]));
  }
}

TEST_F(CudaGraphMode, Bf16ChannelsLastAdamWTrainStepReplaysBitwiseEqualToDirectMode) {
  nn::ModelOptions o;
  o.compute_dtype = DType::bf16;
  o.memory_format = MemoryFormat::channels_last;
  expect_same(trained(ops::DispatchMode::direct, o, adamw(), 9), trained(ops::DispatchMode::graph, o, adamw(), 9));
}

// Dynamic loss scaling, decided on the device: a scale that overflows f32 (2^128, and
// the next ones while the gradients times the scale overflow) makes the first steps skip
// inside the graph as in direct mode, halving it, until it fits and training goes on;
// the same losses, parameters, optimizer state, scale and skips. (These batches of 2 and
// 3 images at 32 x 32 reach layer4 at 1 x 1: its batch norms normalise 2 or 3 values and
// amplify gradients by far more than f16's range; docs/results/gpu_step_memory_graph.md.)
TEST_F(CudaGraphMode, LossScalingDecidesOnTheDeviceAsDirectModeDoes) {
  nn::ModelOptions o;
  o.memory_format = MemoryFormat::channels_last;
  o.initial_loss_scale = std::ldexp(1.0, 128);
  constexpr size_t kSteps = 20;
  auto run = [&](ops::DispatchMode mode, const nn::OptimizerConfig& oc) {
    auto m = nn::make_resnet(resnet18(), mode, "cuda", o);
    m->train();
    auto opt = m->make_optimizer(oc);
    Trained t;
    train(*m, *opt, oc, batches(static_cast<int>(kSteps)), 0, kSteps, t);
    return std::tuple{t, m->loss_scale(), m->skipped_steps()};
  };
  for (const nn::OptimizerConfig& oc : {sgd(), adamw(), adaptive(nn::OptimizerKind::adagrad)}) {
    SCOPED_TRACE(nn::describe(oc));
    const auto [direct, direct_scale, direct_skips] = run(ops::DispatchMode::direct, oc);
    const auto [graph, graph_scale, graph_skips] = run(ops::DispatchMode::graph, oc);
    expect_same(direct, graph);
    EXPECT_EQ(graph_scale, direct_scale);
    EXPECT_EQ(graph_skips, direct_skips);
    EXPECT_GE(graph_skips, 1);
    EXPECT_LT(graph_skips, static_cast<int64_t>(kSteps));
  }
}

// A checkpoint taken after 5 graph-mode steps (both graphs captured) resumes exactly:
// into a fresh model, and into the same model after it went on training (its graphs
// refer to the memory the load writes into).
TEST_F(CudaGraphMode, CheckpointResumesExactly) {
  const std::vector<Batch> data = batches(9);
  for (const nn::OptimizerConfig& oc : {sgd(), adamw()}) {
    SCOPED_TRACE(nn::describe(oc));
    Trained whole;
    auto a = nn::make_resnet(resnet18(), ops::DispatchMode::graph, "cuda");
    auto opt_a = a->make_optimizer(oc);
    a->train();
    train(*a, *opt_a, oc, data, 0, 9, whole);

    auto b = nn::make_resnet(resnet18(), ops::DispatchMode::graph, "cuda");
    auto opt_b = b->make_optimizer(oc);
    b->train();
    Trained first;
    train(*b, *opt_b, oc, data, 0, 5, first);
    Trained detour;
    train(*b, *opt_b, oc, data, 5, 7, detour);  // moves on, then goes back
    b->load_state_dict(first.params);
    opt_b->load_state_dict(first.opt_state);
    Trained resumed = first;
    train(*b, *opt_b, oc, data, 5, 9, resumed);
    expect_same(whole, resumed);

    auto c = nn::make_resnet(resnet18(), ops::DispatchMode::graph, "cuda");
    auto opt_c = c->make_optimizer(oc);
    c->train();
    c->load_state_dict(first.params);
    opt_c->load_state_dict(first.opt_state);
    Trained fresh = first;
    train(*c, *opt_c, oc, data, 5, 9, fresh);
    expect_same(whole, fresh);
  }
}

// A gradient hook (data-parallel averaging's) runs inside the capture, between backward
// and the optimizer's step: its device work replays with the step, the host calls it
// only when a step is planned or captured, and the graph-launch hook follows every
// launch; a hook removed drops the steps captured with it. The hook here zeroes the
// classifier bias's gradient on the backend's stream.
TEST_F(CudaGraphMode, AGradientHookIsCapturedWithTheStep) {
  struct Run {
    Trained t;
    int hooks = 0, launches = 0;
  };
  auto run = [](ops::DispatchMode mode, bool hook) {
    auto m = nn::make_resnet(resnet18(), mode, "cuda");
    EXPECT_EQ(m->mode(), mode);
    m->train();
    auto opt = m->make_optimizer(sgd());
    Run r;
    Tensor bias;
    for (auto& [name, t] : m->module().named_parameters())
      if (name == "fc.bias") bias = t;
    if (hook) {
      m->set_gradient_hook([&r, bias] {
        ++r.hooks;
        const Tensor g = bias.grad();
        ASSERT_TRUE(g.defined());
        ASSERT_EQ(cudaMemsetAsync(g.data_ptr(), 0, g.nbytes(), backends::cuda::context().stream), cudaSuccess);
      });
      m->set_graph_launch_hook([&r] { ++r.launches; });
    }
    train(*m, *opt, sgd(), batches(9), 0, 9, r.t);
    // Without the hook the steps are captured again: a graph kept from before would go on
    // zeroing the gradient (a data-parallel graph, on running a group's collectives).
    m->set_gradient_hook({});
    m->set_graph_launch_hook({});
    train(*m, *opt, sgd(), batches(2), 0, 2, r.t);
    return r;
  };
  const Run direct = run(ops::DispatchMode::direct, true);
  const Run graph = run(ops::DispatchMode::graph, true);
  expect_same(direct.t, graph.t);
  EXPECT_EQ(direct.hooks, 9);
  EXPECT_EQ(direct.launches, 0);
  // Steps 0-3 of batch 2: planned, captured, launched twice; 4-6 of batch 3: planned,
  // captured, launched; 7-8 of batch 2: the first graph launched twice.
  EXPECT_EQ(graph.hooks, 4);
  EXPECT_EQ(graph.launches, 7);
  // The hook did something: without it the classifier's bias moves differently.
  const Run plain = run(ops::DispatchMode::direct, false);
  auto bias_of = [](const Trained& t) {
    for (const auto& [name, v] : t.params)
      if (name == "fc.bias") return v;
    return Tensor();
  };
  EXPECT_FALSE(bitwise_equal(bias_of(plain.t), bias_of(graph.t)));
}

// LeNet's dropout draws a new mask at every launch of the captured step: the same
// masks as direct mode's, step after step and across a second graph, and the layers'
// offsets end where direct mode's do.
TEST_F(CudaGraphMode, DropoutDrawsAtEveryLaunchAsDirectModeDoes) {
  auto run = [](ops::DispatchMode mode, std::vector<uint64_t>& offsets) {
    nn::LeNetConfig lc;
    lc.in_channels = 3;
    lc.input_size = 32;
    lc.dropout_seed = 11;
    auto m = nn::make_lenet(lc, mode, "cuda");
    m->train();
    auto opt = m->make_optimizer(sgd());
    Trained t;
    train(*m, *opt, sgd(), batches(9), 0, 9, t);
    nn::with_policy(mode, "cuda", [&](const auto& p) {
      using P = std::decay_t<decltype(p)>;
      for (auto& [name, mod] : m->module().named_modules())
        if (const auto* d = dynamic_cast<const nn::Dropout<P>*>(mod)) offsets.push_back(d->offset());
    });
    return t;
  };
  std::vector<uint64_t> direct_offsets, graph_offsets;
  const Trained direct = run(ops::DispatchMode::direct, direct_offsets);
  const Trained graph = run(ops::DispatchMode::graph, graph_offsets);
  expect_same(direct, graph);
  ASSERT_FALSE(direct_offsets.empty());
  EXPECT_EQ(direct_offsets, graph_offsets);
  EXPECT_GT(graph_offsets[0], 0u);
}

}  // namespace
}  // namespace strata::testing
