#include "examples/train/precision_check.h"

#include <algorithm>
#include <vector>

#include "examples/train/options.h"

namespace strata::train {

void check_precision_trains(const ModelSpec& spec, ops::DispatchMode mode, const std::string& backend,
                            const Shape& image_chw, const Shape& target_shape, DType target_dtype) {
  if (spec.precision == "fp32") return;
  constexpr int64_t kBatch = 2;  // batch norm needs more than one value per channel
  try {
    auto model = build_model(spec, mode, backend);
    nn::OptimizerConfig oc;
    auto opt = model->make_optimizer(oc);
    Tensor x = Tensor::empty(Shape{kBatch, image_chw[0], image_chw[1], image_chw[2]}, DType::f32);
    std::fill_n(x.data<float>(), x.numel(), 0.0f);
    std::vector<int64_t> sizes{kBatch};
    for (int64_t d : target_shape) sizes.push_back(d);
    Tensor t = Tensor::empty(Shape(sizes.begin(), sizes.end()), target_dtype);
    if (target_dtype == DType::i64)
      std::fill_n(t.data<int64_t>(), t.numel(), int64_t{0});
    else
      std::fill_n(t.data<float>(), t.numel(), 0.0f);
    model->train_step(x, t, *opt);
    model->eval();
    model->predict(x);
  } catch (const std::exception& e) {
    throw UsageError(detail::concat(
        "precision '", spec.precision, "' cannot train ", spec.model, " on backend '", backend, "' in ",
        ops::dispatch_mode_name(mode), " dispatch: ", e.what(),
        " (found by one trial step before training; --precision fp32 runs on every backend)"));
  }
}

}  // namespace strata::train
