#pragma once
// Optimizers on the fused optimizer ops (ops::sgd_step_, ops::adam_step_, ...): SGD with
// momentum, Nesterov and weight decay (torch.optim.SGD, dampening 0), Adam and AdamW
// (torch.optim.Adam / AdamW, per-parameter step counts for bias correction), RMSprop,
// Adagrad and Adadelta (torch.optim's, ops/table/optim_args.h).
// The optimizer reads each parameter's .grad(), which every dispatch mode fills
// (the tape through autograd::backward, direct mode through the modules' backward),
// so one optimizer serves all modes; a parameter without a gradient is skipped, as
// PyTorch does. State (momentum buffers, moments) is allocated on the parameter's
// device at its first step, zero-filled.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/nn/module.h"
#include "strata/ops/dispatch.h"
#include "strata/ops/functional.h"

namespace strata::nn {

struct ParamGroup {
  std::string name;
  StateDict params;  // dotted name -> parameter
  double weight_decay = 0.0;
};

// One group "all" with weight_decay; with no_decay_bn_bias, two: "decay" (the rest)
// and "no_decay" (BatchNorm weights/biases and every bias, weight decay 0), the
// usual practice since Goyal et al. 2017.
std::vector<ParamGroup> param_groups(Module& m, double weight_decay, bool no_decay_bn_bias);

enum class OptimizerKind { sgd, adam, adamw, rmsprop, adagrad, adadelta };
// "sgd" | "adam" | "adamw" | "rmsprop" | "adagrad" | "adadelta"
OptimizerKind parse_optimizer_kind(std::string_view s);
std::string_view optimizer_kind_name(OptimizerKind k);
// torch.optim's default learning rate of a kind (SGD's: strata's 0.1; torch.optim.SGD's
// is 1e-3 since PyTorch 2.2 and was required before).
double default_lr(OptimizerKind k);

// The options of RMSprop, Adagrad and Adadelta beyond the learning rate and weight decay
// (which come from OptimizerConfig and the parameter group), torch.optim's defaults.
struct RmspropConfig {
  double alpha = 0.99, eps = 1e-8, momentum = 0.0;
  bool centered = false;
};
struct AdagradConfig {
  double lr_decay = 0.0, eps = 1e-10, initial_accumulator_value = 0.0;
};
struct AdadeltaConfig {
  double rho = 0.9, eps = 1e-6;
};

// Defaults are torch.optim's (SGD momentum 0, dampening 0, no Nesterov; Adam betas
// 0.9/0.999, eps 1e-8; weight decay 0; RMSprop, Adagrad, Adadelta in their structs)
// except lr, which torch.optim.SGD requires and the others default to default_lr(kind):
// set it. describe() prints every value used.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  double lr = 0.1;
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  double weight_decay = 0.0;
  bool no_decay_bn_bias = false;
  RmspropConfig rmsprop{};
  AdagradConfig adagrad{};
  AdadeltaConfig adadelta{};
};
std::string describe(const OptimizerConfig& c);

// The fused steps on one backend through one dispatch mode (tape policies: the op
// front end; direct: the backend's functions with the arguments filled in). A step is a
// parameter group's list in one call (ops::MultiSgdStepArgs): one multi-tensor launch or
// a few on the cuda backend instead of one per parameter.
class StepKernels {
 public:
  virtual ~StepKernels() = default;
  // `bufs` empty without momentum. Direct mode only (empty / undefined otherwise):
  // `hypers` one f64 {lr, step} per parameter read when the kernel runs, `amp` dynamic
  // loss scaling's state (ops::AmpUpdateScaleArgs).
  virtual void sgd(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> bufs,
                   const ops::SgdOptions& o, std::span<const Tensor> hypers, const Tensor& amp) = 0;
  virtual void adam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> m,
                    std::span<const Tensor> v, std::span<const int64_t> steps, const ops::AdamOptions& o,
                    std::span<const Tensor> hypers, const Tensor& amp) = 0;
  // `bufs` empty without momentum, `grad_avgs` unless centered.
  virtual void rmsprop(std::span<const Tensor> params, std::span<const Tensor> grads,
                       std::span<const Tensor> square_avgs, std::span<const Tensor> bufs,
                       std::span<const Tensor> grad_avgs, const ops::RmspropOptions& o, std::span<const Tensor> hypers,
                       const Tensor& amp) = 0;
  virtual void adagrad(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> sums,
                       std::span<const int64_t> steps, const ops::AdagradOptions& o, std::span<const Tensor> hypers,
                       const Tensor& amp) = 0;
  virtual void adadelta(std::span<const Tensor> params, std::span<const Tensor> grads,
                        std::span<const Tensor> square_avgs, std::span<const Tensor> acc_deltas,
                        const ops::AdadeltaOptions& o, std::span<const Tensor> hypers, const Tensor& amp) = 0;
  virtual void fill(const Tensor& t, double value) = 0;
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  virtual std::string_view backend_name() const = 0;
};
std::shared_ptr<StepKernels> make_step_kernels(ops::DispatchMode mode, std::string_view backend);

// Dynamic loss scaling's device state (ops::AmpUpdateScaleArgs) on the host: a read that
// waits for the device.
std::array<double, 4> read_amp_state(const Tensor& amp);

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& c, std::vector<ParamGroup> groups, std::shared_ptr<StepKernels> kernels);

  // One update of every parameter that has a gradient: one list call per group.
  void step();
  // Direct and graph modes, dynamic loss scaling decided on the device: the gradients
  // are the scaled ones and `amp` the state amp_update_scale wrote this step; the
  // kernels read each gradient times 1/scale, or skip the step, without the host
  // knowing which. Adam's step counts then include the skipped steps: state_dict()
  // reads the skips from the device to save the counts of the steps taken.
  void step(const Tensor& amp);
  // set_to_none (default): gradients become undefined (no memory traffic); otherwise
  // they are filled with zeros.
  void zero_grad(bool set_to_none = true);

  // Graph mode (nn/model.cpp captures a whole training step, this step included). While
  // a capture runs, step() has its kernels read the learning rate and step counts when
  // they run, from a pinned host tensor that the step copies into its backend's scratch
  // (a cuda graph copies what the tensor holds at each launch; no device memory outlives
  // the step, so graph mode's peak is direct mode's), and returns nothing else different;
  // each launch of the captured step is preceded by advance_captured(): the counts of the
  // parameters that stepped in the capture go up by one and the learning rate and counts
  // are written to that tensor, so a schedule (set_lr) takes effect without capturing
  // again. The captured kernels refer to the state tensors: state_epoch() changes
  // whenever they are replaced.
  void begin_capture();
  // The parameters (slot indices) that stepped since begin_capture.
  std::vector<size_t> end_capture();
  void advance_captured(const std::vector<size_t>& stepped);
  void write_run_time_hyperparameters();
  uint64_t state_epoch() const { return state_epoch_; }

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t step_count() const { return steps_; }
  void set_step_count(int64_t n) { steps_ = n; }
  const OptimizerConfig& config() const { return c_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

  // PyTorch's state names: "<param>.momentum_buffer" (sgd with momentum); "<param>.exp_avg",
  // ".exp_avg_sq" (adam/adamw); ".square_avg", ".momentum_buffer" (with momentum),
  // ".grad_avg" (centered) for rmsprop; ".sum" (adagrad); ".square_avg", ".acc_delta"
  // (adadelta); and "<param>.step" (i64 scalar, host) for all but sgd. Entries exist once a
  // parameter has stepped. load_state_dict() checks names, shapes, and that every entry
  // names a parameter of this optimizer.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& sd);
  std::string describe() const;

  // A kind's state tensors per parameter, in the order its kernels take them: their
  // names in state_dict() and first value.
  struct StateSpec {
    std::string name;
    double init = 0.0;
  };
  const std::vector<StateSpec>& state_specs() const { return specs_; }

 private:
  struct State {
    std::vector<Tensor> bufs;  // one per StateSpec, once allocated
    int64_t step = 0;
  };
  struct Slot {
    std::string name;
    Tensor param;
    State state;
  };
  void allocate(Slot& s);
  // The slots [begin, end) (one group) that have a gradient, in one call.
  void step_group(size_t begin, size_t end, double weight_decay);
  // Dynamic loss scaling: its state, and the steps it skipped so far (device reads;
  // 0 without it).
  std::array<double, 4> read_amp() const;
  int64_t skipped_total() const;

  OptimizerConfig c_;
  std::vector<StateSpec> specs_;
  std::vector<ParamGroup> groups_;
  std::vector<Slot> slots_;
  std::shared_ptr<StepKernels> kernels_;
  double lr_;
  int64_t steps_ = 0;
  // Graph mode: {lr, step} per slot, in pinned host memory.
  Tensor hyper_;
  bool capturing_ = false;
  std::vector<size_t> stepped_;
  uint64_t state_epoch_ = 0;
  // Dynamic loss scaling on the device (step(amp)): its state. Each Adam slot's count
  // is then its attempted steps plus the skips before its first, so that the kernels'
  // count less amp's skipped steps is the steps taken.
  Tensor amp_;
};

}  // namespace strata::nn
