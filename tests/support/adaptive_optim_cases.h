#pragma once
// RMSprop, Adagrad and Adadelta for the tests: the configurations every backend is run
// in, one step on a backend with a case's state tensors, and the oracle, an f64
// transcription of torch.optim's _single_tensor_rmsprop / _adagrad / _adadelta written
// apart from strata's own update (ops/table/optim_args.h), including their differences
// of form (RMSprop's centered average by lerp).
#include <cstdint>
#include <string>
#include <vector>

#include "strata/backends/api/backend.h"
#include "strata/core/tensor.h"

namespace strata::testing {

enum class Adaptive { rmsprop, adagrad, adadelta };

struct AdaptiveCase {
  std::string name;
  Adaptive kind;
  ops::RmspropOptions rmsprop{};
  ops::AdagradOptions adagrad{};
  ops::AdadeltaOptions adadelta{};
  double init = 0.0;  // Adagrad's initial_accumulator_value (the sum's first value)
};

// Each optimizer at torch.optim's defaults and with weight decay; RMSprop with momentum,
// centered and both; Adagrad with lr_decay and an initial accumulator; Adadelta with
// another rho and eps. Learning rates large enough that a wrong term shows.
std::vector<AdaptiveCase> adaptive_cases();

// The layouts a model's parameters come in: contiguous, channels-last, a transposed view
// (of `sizes`, stored transposed), one element, and a large one of `large` sizes.
struct ParamLayout {
  std::string name;
  Shape sizes;
  MemoryFormat fmt;
  bool transposed;
};
std::vector<ParamLayout> param_layouts(const Shape& large);

// A case's state tensors per parameter, in the order its op takes them (RMSprop:
// square_avg, then momentum_buf and grad_avg where its options keep them).
int state_count(const AdaptiveCase& c);
// Zero-filled state (Adagrad's at init), each like `p` (its sizes and memory format).
std::vector<Tensor> new_state(const AdaptiveCase& c, const Tensor& p);
std::vector<Tensor> clone_state(const std::vector<Tensor>& state);

// One step of p on `b` at 1-based step t (Adagrad's count), with graph mode's hyper and
// loss scaling's amp where given; lr overrides the case's (a decoy under hyper).
void adaptive_step(backends::Backend& b, const AdaptiveCase& c, const Tensor& p, const Tensor& g,
                   const std::vector<Tensor>& state, int64_t t, const Tensor& hyper = {}, const Tensor& amp = {},
                   double lr = -1);
// The same for a list: state[i] is parameter i's, hypers empty or one per parameter.
void adaptive_multi_step(backends::Backend& b, const AdaptiveCase& c, const std::vector<Tensor>& params,
                         const std::vector<Tensor>& grads, const std::vector<std::vector<Tensor>>& state,
                         const std::vector<int64_t>& steps, const std::vector<Tensor>& hypers = {},
                         const Tensor& amp = {}, double lr = -1);

// The oracle's step of every element, state in the order above.
void oracle_step(const AdaptiveCase& c, std::vector<double>& p, const std::vector<double>& g,
                 std::vector<std::vector<double>>& state, int64_t t);
double case_lr(const AdaptiveCase& c);

}  // namespace strata::testing
