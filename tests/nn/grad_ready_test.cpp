// The grad-ready reports of direct-mode backward (nn::Module::set_grad_ready_hook), on
// which data-parallel training starts its gradient buckets early: every parameter is
// reported exactly once, after its gradient exists, and in reverse registration order
// (the buckets' order), so every rank starts the same all-reduces in the same order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "gpt_test_util.h"
#include "nn_test_util.h"
#include "strata/nn/model.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

// Every parameter in exactly one report, each report's parameters all registered before the
// previous report's (reverse registration order: the buckets' order).
void expect_each_once_in_reverse_order(const std::vector<std::vector<size_t>>& reports,
                                       const nn::StateDict& params) {
  std::vector<int> seen(params.size(), 0);
  size_t previous_min = params.size();
  for (const auto& ids : reports) {
    ASSERT_FALSE(ids.empty());
    size_t lo = params.size(), hi = 0;
    for (size_t i : ids) {
      ++seen[i];
      lo = std::min(lo, i);
      hi = std::max(hi, i);
    }
    EXPECT_LT(hi, previous_min) << "a report came out of reverse registration order";
    previous_min = lo;
  }
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(seen[i], 1) << params[i].first;
}

TEST(GradReady, DirectResNetReportsEveryParameterOnceInReverseOrder) {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.small_input = true;
  c.base_channels = 4;
  c.init.seed = 3;
  auto m = nn::make_resnet(c, DispatchMode::direct, "reference");
  const nn::StateDict params = m->module().named_parameters();
  std::map<const void*, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].second.data_ptr()] = i;

  std::vector<std::vector<size_t>> reports;
  std::vector<bool> had_grad;
  m->module().set_grad_ready_hook([&](const nn::Module& mod) {
    std::vector<size_t> ids;
    for (const Tensor& p : mod.parameters()) {
      ids.push_back(index.at(p.data_ptr()));
      had_grad.push_back(p.grad().defined());
    }
    reports.push_back(ids);
  });
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 5);
  const Tensor y = Tensor::from_vector(std::vector<int64_t>{1, 7}, Shape{2});
  m->forward_loss(x, y);
  m->backward();
  expect_each_once_in_reverse_order(reports, params);
  for (bool g : had_grad) EXPECT_TRUE(g) << "a parameter was reported before its gradient existed";

  // Off again: nothing more is reported.
  m->module().set_grad_ready_hook({});
  const size_t before = reports.size();
  m->forward_loss(x, y);
  m->backward();
  EXPECT_EQ(reports.size(), before);
}

// GPT-2 in direct mode reports its final layer norm, each block from the last, then the position
// and token embeddings (the tied token embedding last: the output projection's share of its
// gradient comes first, the lookup's last).
TEST(GradReady, DirectGptReportsEveryParameterOnceInReverseOrder) {
  const nn::GptConfig c = tiny_gpt();
  auto m = nn::make_gpt(c, DispatchMode::direct, "reference");
  const nn::StateDict params = m->module().named_parameters();
  std::map<const void*, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].second.data_ptr()] = i;
  std::vector<std::vector<size_t>> reports;
  bool without_grad = false;
  m->module().set_grad_ready_hook([&](const nn::Module& mod) {
    std::vector<size_t> ids;
    for (const Tensor& p : mod.parameters()) {
      ids.push_back(index.at(p.data_ptr()));
      without_grad = without_grad || !p.grad().defined();
    }
    reports.push_back(ids);
  });
  const auto [x, y] = gpt_batch(0, 2, 3);
  m->forward_loss(x, y);
  m->backward();
  EXPECT_EQ(reports.size(), static_cast<size_t>(c.n_layer) + 3);  // ln_f, the blocks, wpe, wte
  expect_each_once_in_reverse_order(reports, params);
  EXPECT_FALSE(without_grad) << "a parameter was reported before its gradient existed";
}

TEST(GradReady, TapeModesReportNothing) {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.small_input = true;
  c.base_channels = 4;
  auto m = nn::make_resnet(c, DispatchMode::virtual_call, "reference");
  int reports = 0;
  m->module().set_grad_ready_hook([&](const nn::Module&) { ++reports; });
  m->forward_loss(random_tensor({2, 3, 8, 8}, DType::f32, 5), Tensor::from_vector(std::vector<int64_t>{1, 7}, Shape{2}));
  m->backward();
  EXPECT_EQ(reports, 0);
}

// Model::set_param_ready_hook: in every mode each parameter is reported once per step,
// with its gradient there, before the gradient hook; direct mode's memory plan (the first
// step records its kernels without running them) reports nothing while recording.
TEST(GradReady, ModelReportsEveryParameterOnceInEveryMode) {
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(ops::dispatch_mode_name(mode));
    auto m = nn::make_resnet(tiny_resnet(18), mode, "reference");
    const nn::StateDict params = m->module().named_parameters();
    std::map<const void*, size_t> index;
    for (size_t i = 0; i < params.size(); ++i) index[params[i].second.data_ptr()] = i;
    std::vector<int> seen(params.size(), 0);
    bool hook_ran = false, late = false, without_grad = false;
    m->set_param_ready_hook([&](const Tensor& p) {
      ++seen[index.at(p.data_ptr())];
      late = late || hook_ran;
      without_grad = without_grad || !p.grad().defined();
    });
    m->set_gradient_hook([&] { hook_ran = true; });
    auto opt = m->make_optimizer({});
    const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 5);
    const Tensor y = Tensor::from_vector(std::vector<int64_t>{1, 7}, Shape{2});
    for (int step = 1; step <= 2; ++step) {
      hook_ran = false;
      m->train_step(x, y, *opt);
      for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(seen[i], step) << params[i].first;
    }
    EXPECT_FALSE(late) << "a parameter was reported after the gradient hook";
    EXPECT_FALSE(without_grad) << "a parameter was reported before its gradient existed";
    m->set_param_ready_hook({});
    m->train_step(x, y, *opt);
    EXPECT_EQ(seen[0], 2);
  }
}

}  // namespace
}  // namespace strata::testing
