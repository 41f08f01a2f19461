#pragma once
// Evaluation of a model over a dataset: the mean loss and, for single-label
// classification, the accuracy, with gradients off and the model in eval mode for the pass
// (its train/eval state is restored after, also when an error ends the pass).
//
//   data::Loader test(test_set, {.batch_size = 256, .transforms = {data::norm::fashion_mnist()}});
//   const nn::EvalResult r = model->evaluate(test);        // one whole pass of `test`
//   std::cout << "test loss " << r.loss << "  accuracy " << r.accuracy << "\n";
//
// Model::evaluate(loader) takes any loader with start_epoch(int64_t) and next() returning
// an optional batch with `images` and `targets` (data::Loader), so nn/ does not depend on
// data/. It starts epoch 0 of the loader and reads it to the end: give it a loader of its own,
// not one a training loop is in the middle of. The pass runs as forward_loss with gradients
// off (in direct mode a planned forward-only step per batch shape; tensors the model returned
// before are overwritten as by any forward).
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

#include "strata/core/tensor.h"

namespace strata::nn {

class Model;

struct EvalResult {
  double loss = std::numeric_limits<double>::quiet_NaN();  // mean over the examples
  // cross_entropy: the fraction of examples whose logits' argmax (first maximum) is the
  // label; bce_logits (multi-label, where accuracy is not the usual score): NaN.
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  // The sums behind them, for combining the results of several shards (data parallel):
  // loss_sum is each batch's mean loss times its rows.
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t examples = 0;
};

struct EvalBatch {
  Tensor inputs, targets;  // as forward_loss takes them
};
// The next batch, or nullopt at the end of the data.
using NextEvalBatch = std::function<std::optional<EvalBatch>()>;
// Called with each batch's logits (in the parameters' dtype, on the model's device) and its
// targets as given, e.g. to keep the scores for mean average precision.
using EvalObserver = std::function<void(const Tensor& logits, const Tensor& targets)>;

// What Model::evaluate runs. Throws strata::Error naming the batch when a batch has no rows
// or the data has none, and when a batch's targets do not fit the loss (forward_loss's check).
EvalResult evaluate(Model& model, const NextEvalBatch& next, const EvalObserver& observe = {});

// The number of rows of row-major [n, classes] logits whose argmax (first maximum) equals the label.
int64_t count_correct(const float* logits, const int64_t* labels, int64_t n, int64_t classes);

}  // namespace strata::nn
