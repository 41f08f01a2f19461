#include "strata/nn/evaluate.h"

#include <algorithm>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/nn/model.h"
#include "strata/nn/restore_training.h"

namespace strata::nn {

int64_t count_correct(const float* logits, const int64_t* labels, int64_t n, int64_t classes) {
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    correct += std::max_element(row, row + classes) - row == labels[i];
  }
  return correct;
}

EvalResult evaluate(Model& model, const NextEvalBatch& next, const EvalObserver& observe) {
  detail::RestoreTraining restore(model.module());
  model.eval();
  autograd::NoGradGuard no_grad;
  const bool classification = model.loss_kind() == LossKind::cross_entropy;
  EvalResult r;
  int64_t batch = 0;
  while (std::optional<EvalBatch> b = next()) {
    STRATA_CHECK(b->inputs.defined() && b->inputs.dim() >= 1 && b->inputs.size(0) > 0, "Model::evaluate: batch ",
                 batch, " has no rows (inputs ", b->inputs.defined() ? b->inputs.str() : "undefined", ")");
    const int64_t n = b->inputs.size(0);
    const StepResult out = model.forward_loss(b->inputs, b->targets);
    r.loss_sum += out.loss.item() * static_cast<double>(n);
    if (classification) {
      const std::vector<float> logits = out.logits.to_vector<float>();
      const std::vector<int64_t> labels = b->targets.to_vector<int64_t>();
      r.correct += count_correct(logits.data(), labels.data(), n, out.logits.size(1));
    }
    if (observe) observe(out.logits, b->targets);
    r.examples += n;
    ++batch;
  }
  STRATA_CHECK(r.examples > 0, "Model::evaluate: the data gave no batches (an empty dataset, or a loader already "
               "at its end)");
  r.loss = r.loss_sum / static_cast<double>(r.examples);
  if (classification) r.accuracy = static_cast<double>(r.correct) / static_cast<double>(r.examples);
  return r;
}

}  // namespace strata::nn
