// Model::evaluate: the mean loss and the accuracy over a whole pass of a loader, against the
// same quantities computed here in f64 from predict()'s logits, batch by batch (uneven batches,
// a batch of one), in every dispatch mode; the train/eval state comes back as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "strata/core/factories.h"
#include "strata/data/dataset.h"
#include "strata/data/loader.h"
#include "strata/nn/custom_model.h"
#include "strata/nn/evaluate.h"
#include "strata/nn/layers/factories.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

auto mlp = [](const auto& p) {
  return nn::sequential(nn::linear(p, 5, 12), nn::relu(p), nn::dropout(p, 0.5, 3), nn::linear(p, 12, 4));
};

// The loader interface Model::evaluate takes, over fixed batches.
struct FixedBatches {
  struct Batch {
    Tensor images, targets;
  };
  std::vector<Batch> batches;
  size_t next_ = 0;
  int64_t started = -1;
  void start_epoch(int64_t e) { started = e, next_ = 0; }
  std::optional<Batch> next() {
    if (next_ == batches.size()) return std::nullopt;
    return batches[next_++];
  }
};

// Softmax cross-entropy summed over the rows and the rows whose first maximum is the label, in f64.
void reference_sums(const Tensor& logits, const Tensor& labels, double& loss_sum, int64_t& correct) {
  const std::vector<double> z = logits.to_vector<double>();
  const std::vector<int64_t> y = labels.to_vector<int64_t>();
  const int64_t n = logits.size(0), k = logits.size(1);
  for (int64_t i = 0; i < n; ++i) {
    const double* row = z.data() + i * k;
    double m = row[0];
    int64_t arg = 0;
    for (int64_t j = 1; j < k; ++j)
      if (row[j] > m) m = row[j], arg = j;
    double s = 0;
    for (int64_t j = 0; j < k; ++j) s += std::exp(row[j] - m);
    loss_sum += std::log(s) + m - row[y[i]];
    correct += arg == y[i];
  }
}

TEST(Evaluate, CountCorrectUsesTheFirstMaximum) {
  const float logits[] = {0.1f, 0.9f, 0.0f,  //
                          2.0f, 2.0f, 1.0f,  //
                          -1.f, -2.f, -0.5f};
  const int64_t labels[] = {1, 1, 2};
  EXPECT_EQ(nn::count_correct(logits, labels, 3, 3), 2);  // row 1's tie goes to class 0
}

TEST(Evaluate, LossAndAccuracyOverUnevenBatchesInEveryMode) {
  Generator gen(11);
  FixedBatches data;
  for (int64_t n : {7, 3, 1, 6}) data.batches.push_back({randn({n, 5}, gen), randint(0, 4, {n}, gen)});
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(ops::dispatch_mode_name(mode));
    manual_seed(2);
    auto model = nn::make_model(mlp, mode, "reference");
    // A little training first, so that the accuracy is neither 0 nor 1 by construction.
    auto opt = model->make_optimizer({.lr = 0.1});
    for (int s = 0; s < 3; ++s) model->train_step(data.batches[0].images, data.batches[0].targets, *opt);

    double loss_sum = 0;
    int64_t correct = 0, n = 0;
    model->eval();
    for (const auto& b : data.batches) {
      reference_sums(model->predict(b.images), b.targets, loss_sum, correct);
      n += b.images.size(0);
    }
    model->train();

    const nn::EvalResult r = model->evaluate(data);
    EXPECT_EQ(data.started, 0);
    EXPECT_EQ(r.examples, 17);
    EXPECT_EQ(r.correct, correct);
    EXPECT_DOUBLE_EQ(r.accuracy, static_cast<double>(correct) / 17.0);
    EXPECT_NEAR(r.loss_sum, loss_sum, 1e-4 * std::max(1.0, loss_sum));
    EXPECT_NEAR(r.loss, loss_sum / static_cast<double>(n), 1e-5);
    EXPECT_TRUE(model->module().is_training());  // evaluated in eval mode, and put back
  }
}

TEST(Evaluate, ADataLoaderPassAndTheTrainStateOfEachModule) {
  Generator gen(3);
  const Tensor images = randint(0, 256, {10, 1, 2, 3}, gen, DType::u8), labels = randint(0, 4, {10}, gen);
  auto set = std::make_shared<data::InMemoryDataset>("tiny", images, labels, 4);
  data::Loader loader(set, {.batch_size = 4});
  manual_seed(4);
  auto model = nn::make_model([](const auto& p) { return nn::sequential(nn::flatten(p), nn::linear(p, 6, 4)); },
                              DispatchMode::virtual_call, "reference");
  // A module the user put in eval mode stays there; the rest stays in training.
  model->module().children()[1].second->eval();

  double loss_sum = 0;
  int64_t correct = 0;
  loader.start_epoch(0);
  while (auto b = loader.next()) reference_sums(model->predict(b->images), b->targets, loss_sum, correct);
  model->train();
  model->module().children()[1].second->eval();

  const nn::EvalResult r = model->evaluate(loader);
  EXPECT_EQ(r.examples, 10);
  EXPECT_EQ(r.correct, correct);
  EXPECT_NEAR(r.loss, loss_sum / 10.0, 1e-5);
  EXPECT_TRUE(model->module().is_training());
  EXPECT_TRUE(model->module().children()[0].second->is_training());
  EXPECT_FALSE(model->module().children()[1].second->is_training());
  // A second pass starts the loader again and gives the same numbers.
  const nn::EvalResult again = model->evaluate(loader);
  EXPECT_EQ(again.examples, 10);
  EXPECT_EQ(again.loss, r.loss);
}

TEST(Evaluate, MultiLabelHasALossAndNoAccuracyAndShowsEachBatch) {
  Generator gen(5);
  FixedBatches data;
  for (int64_t n : {4, 2}) data.batches.push_back({randn({n, 5}, gen), randint(0, 2, {n, 4}, gen, DType::f32)});
  nn::ModelOptions o;
  o.loss = nn::LossKind::bce_logits;
  auto model = nn::make_model(mlp, DispatchMode::virtual_call, "reference", o);
  double loss_sum = 0;
  model->eval();
  for (const auto& b : data.batches) {
    const std::vector<double> z = model->predict(b.images).to_vector<double>(), t = b.targets.to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < z.size(); ++i)
      s += std::max(z[i], 0.0) - z[i] * t[i] + std::log1p(std::exp(-std::abs(z[i])));
    loss_sum += s / 4.0;  // the mean over the labels of a row, summed over the rows
  }
  int64_t rows_seen = 0;
  const nn::EvalResult r = model->evaluate(data, [&](const Tensor& logits, const Tensor& targets) {
    EXPECT_EQ(logits.sizes(), targets.sizes());
    rows_seen += logits.size(0);
  });
  EXPECT_EQ(rows_seen, 6);
  EXPECT_NEAR(r.loss, loss_sum / 6.0, 1e-5);
  EXPECT_TRUE(std::isnan(r.accuracy));
}

TEST(Evaluate, NoDataIsAnErrorAndTheStateComesBack) {
  auto model = nn::make_model(mlp, DispatchMode::virtual_call, "reference");
  FixedBatches empty;
  EXPECT_STRATA_ERROR(model->evaluate(empty), "Model::evaluate: the data gave no batches");
  EXPECT_TRUE(model->module().is_training());
  FixedBatches bad;
  bad.batches.push_back({randn({2, 5}), randint(0, 9, {3})});  // 3 labels for 2 rows
  EXPECT_THROW(model->evaluate(bad), Error);
  EXPECT_TRUE(model->module().is_training());
}

}  // namespace
}  // namespace strata::testing
