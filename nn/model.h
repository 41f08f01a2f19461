#pragma once
// The type-erased model: one switch at the top picks the dispatch mode and the
// backend, and everything below is compiled for every combination of the build
// (one virtual call per step here; the layers below call each other directly).
//
//   auto model = nn::make_resnet(cfg, ops::parse_dispatch_mode("direct"), "reference");
//   std::cout << model->describe() << "\n";   // model, parameters, init policy, mode
//   auto opt = model->make_optimizer(optim_cfg);
//   for (...) { auto r = model->train_step(images, labels, *opt); ... r.loss.item() ... }
//
// Inputs may live anywhere and have any dtype: they are converted to the model's
// device, dtype and memory format. In direct mode they are copied into the model's
// planned input buffers (what a hand-written cuDNN network does with cudaMemcpy);
// write into input_buffer() and targets_buffer() to skip that copy. What predict,
// forward_loss and train_step return is the caller's in every mode (direct and graph modes
// copy their planned outputs out); ModelOptions::borrowed_results returns the planned buffers
// themselves instead, overwritten by the next call, for those who measure that copy.
//
// Direct mode plans the memory of train_step, predict and forward_loss with gradients
// off (ops/direct/step_memory.h): the first call for an input shape records the step,
// lays its buffers out in one arena and runs; forward, and forward_loss with gradients
// on followed by backward, reuse those plans when the shapes match and otherwise
// allocate each buffer on its own.
//
// Graph mode (the cuda backend) is direct mode whose train_step, and predict in eval
// mode, are captured: the first call for an input shape plans and runs as direct mode,
// the second captures the step into a CUDA graph (ops/direct/graph_capture.h) and every
// later call copies the input (and targets) into the planned buffers and launches the
// graph (a bounded cache of graphs, one per shape; returned tensors are overwritten by
// the next launch). A captured train_step is forward, loss, backward and the optimizer's
// step; the learning rate and step counts are read from device memory written before
// each launch (a schedule never captures again), BatchNorm's batch counter counts each
// launch, dropout draws a new mask at each launch (its seed and offset are read from
// device memory written before it). Its forward, forward_loss and backward run as in
// direct mode, and predict in train mode too. Dynamic loss scaling (f16) is captured:
// the scale lives in device memory and a skipped step is decided there. The gradient
// hooks are captured with it: data-parallel training's all-reduces (and synchronised
// batch norm's) are NCCL calls inside the graph, each launch then bounded by the
// graph-launch hook (dist/data_parallel.h).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "strata/nn/evaluate.h"
#include "strata/nn/init.h"
#include "strata/nn/layers/transformer.h"
#include "strata/nn/lenet.h"
#include "strata/nn/loss.h"
#include "strata/nn/module.h"
#include "strata/nn/optim.h"
#include "strata/nn/resnet.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/dispatch.h"

namespace strata::nn {

struct ModelOptions {
  LossKind loss = LossKind::cross_entropy;
  // cross_entropy: targets equal to this are left out of the loss's mean (padding, a prompt's
  // positions), as torch.nn.CrossEntropyLoss's ignore_index; every target ignored gives NaN.
  int64_t ignore_index = ops::kDefaultIgnoreIndex;
  // Direct and graph modes: return the planned output buffers of predict, forward_loss and
  // train_step themselves (no copy; the next call overwrites them) instead of copies the
  // caller owns. The tape modes return fresh tensors either way.
  bool borrowed_results = false;
  // The layout of the network's 4-D activations and convolution weights. nullopt: the one the
  // backend runs fastest for the compute dtype under its settings when the model is made
  // (Backend::preferred_memory_format: NCHW on the CPU backends and in strict f32 on cuda,
  // channels-last for cuda's tensor-core dtypes), as PyTorch's inductor picks a layout for a
  // frozen model; inputs in either layout are converted to it (ops copy them once per call).
  std::optional<MemoryFormat> memory_format;
  // Mixed precision: activations, convolutions and matmuls in this dtype (bf16/f16),
  // parameters (master weights), optimizer state, batch-norm statistics and the loss
  // in the parameters' dtype; nullopt computes in the parameters' dtype. Any compute
  // dtype narrower than the parameters works (f32 compute with f64 masters on the CPU
  // reference); direct mode plans the conversions (weights, batch norm, logits) once.
  std::optional<DType> compute_dtype;
  // Dynamic loss scaling in train_step (PyTorch GradScaler's rule: the loss times S
  // before backward, gradients times 1/S after; a step with a non-finite gradient is
  // skipped and halves S; 2000 finite steps in a row double it). nullopt: on, from
  // 65536, when computing in f16 (whose small range loses gradients), off otherwise;
  // a value: on from that scale for any dtype; 0: off. The tape modes unscale the
  // gradients and decide on the host (one read per step); direct and graph modes decide
  // on the device: the scale is read from device memory as the loss's seed, a kernel
  // checks the gradients and updates the scale, and the optimizer's kernels unscale or
  // skip (.grad() then holds the scaled gradients; loss_scale() and skipped_steps()
  // read the device).
  std::optional<double> initial_loss_scale;
  // make_model only (nn/custom_model.h): re-initialise the network with this named
  // policy before training, printed by describe(); nullopt keeps the layers'
  // construction-time values. make_resnet/make_lenet take it from their config.
  std::optional<InitConfig> init;
};

// "fp32" -> nullopt (the parameters' dtype), "bf16" -> bf16, "fp16" -> f16, else a
// strata::Error listing the known names.
std::optional<DType> parse_precision(std::string_view name);

struct StepResult {
  Tensor loss;    // rank 0, on the model's device
  // [N, classes]: in the parameters' dtype, except under mixed precision with a
  // cross-entropy the backend reads in the compute dtype (Model::loss_input, as PyTorch's
  // autocast returns its bf16 output): then in the compute dtype.
  Tensor logits;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual Module& module() = 0;
  virtual const Module& module() const = 0;
  virtual ops::DispatchMode mode() const = 0;
  virtual std::string_view backend_name() const = 0;
  virtual Device device() const = 0;
  virtual DType dtype() const = 0;
  virtual LossKind loss_kind() const = 0;

  // Logits for x in the current train/eval state; the tape modes record the tape
  // when grad mode is on.
  virtual Tensor forward(const Tensor& x) = 0;
  // forward and loss (targets: i64 labels [N] for cross_entropy, [N, classes] for
  // bce_logits); keeps what backward() needs.
  virtual StepResult forward_loss(const Tensor& x, const Tensor& targets) = 0;
  // Gradients of the latest forward_loss into every parameter's .grad()
  // (accumulating onto gradients already there).
  virtual void backward() = 0;
  // opt.zero_grad(); forward_loss; backward; opt.step() (with loss scaling: the step
  // is skipped when a gradient is not finite, see ModelOptions::initial_loss_scale).
  virtual StepResult train_step(const Tensor& x, const Tensor& targets, Optimizer& opt) = 0;
  // Loss scaling state: the current scale (0 when off) and the steps skipped so far.
  virtual double loss_scale() const = 0;
  virtual int64_t skipped_steps() const = 0;
  // Logits without recording a tape.
  virtual Tensor predict(const Tensor& x) = 0;
  // Direct mode: the planned input buffer for inputs of `sizes`, in the compute dtype
  // (write a batch here to avoid a copy). Tape modes: a fresh tensor on the device.
  virtual Tensor input_buffer(const Shape& sizes) = 0;
  // The same for the loss's targets: class indices (i64) for cross-entropy, values in the
  // parameters' dtype for bce_logits. Labels written here are read in place; others are
  // copied into it first (a buffer of the model's beside the caller's).
  virtual Tensor targets_buffer(const Shape& sizes) = 0;
  // Direct mode: the buffers of the latest newly planned step and the arena they share
  // (zeros before one, and in the tape modes).
  virtual const ops::direct::StepMemoryStats& step_memory() const = 0;

  void train(bool on = true) { module().train(on); }
  void eval() { module().train(false); }
  int64_t num_parameters() const { return module().num_parameters(); }
  StateDict state_dict() const { return module().state_dict(); }
  void load_state_dict(const StateDict& sd, bool strict = true) { module().load_state_dict(sd, strict); }
  // Parameter groups from the config, step kernels of this model's mode and backend.
  std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c);
  // One line for every run's log: the model, its parameter count, the init policy,
  // the dispatch mode, the backend, the dtype and the loss.
  const std::string& describe() const { return describe_; }
  // verbose: that line, then one row per module of the network (its dotted name, its type and
  // configuration, its output shape, its parameters with its children's) and the total, as
  // Keras's summary() and torchinfo print (nn/summary.cpp says how the shapes are found). The
  // shapes are those for inputs of `input` sizes ([N, C, H, W] or [N, features]); empty: those
  // of the latest input the model was given; shapes are left out when there is neither. It runs
  // the network forward with gradients off in eval mode (the train/eval state is restored):
  // call it between steps, not between forward_loss and backward. Not verbose: describe().
  std::string describe(bool verbose, const Shape& input = {});
  // The loss and accuracy over one whole pass of `loader` (nn/evaluate.h): any loader with
  // start_epoch(int64_t) and next() returning an optional batch of `images` and `targets`.
  template <class Loader>
  EvalResult evaluate(Loader& loader, const EvalObserver& observe = {}) {
    loader.start_epoch(0);
    return nn::evaluate(
        *this,
        [&loader]() -> std::optional<EvalBatch> {
          auto b = loader.next();
          if (!b) return std::nullopt;
          return EvalBatch{b->images, b->targets};
        },
        observe);
  }
  // x converted to what the network's first layer takes (device, compute dtype, memory
  // format), as forward() does before running the network; in direct mode the planned input
  // buffer, which x is copied into.
  virtual Tensor network_input(const Tensor& x) = 0;
  // The sizes of the latest input given to forward, forward_loss, train_step or predict
  // (empty before one).
  const Shape& latest_input_sizes() const { return latest_input_sizes_; }
  // Called by train_step once the step's gradients are complete and before anything
  // reads them (the optimizer, the loss scaler's finiteness check): data-parallel
  // training averages them across processes here (dist/data_parallel.h), so every
  // rank takes the same step and skips the same ones. Empty: nothing is called.
  // Graph mode captures the hooks with the step: changing either drops the captured
  // steps (a graph would go on running the old hook's work, e.g. the collectives of a
  // process group being destroyed), and the next steps capture again.
  void set_gradient_hook(std::function<void()> fn) {
    gradient_hook_ = std::move(fn);
    drop_captured_steps();
  }
  // Called during backward with each parameter whose gradient is complete, while the
  // rest of backward still runs: data-parallel training starts averaging then
  // (dist/grad_buckets.h). Tape modes: every parameter, as the autograd engine adds its
  // last contribution (autograd::LeafDone); direct mode: the parameters of each module
  // the network reports (Module::set_grad_ready_hook: ResNet's blocks, stem and
  // classifier; other networks report none), through the network's own hook, which this
  // one takes over. A parameter not reported is complete when the gradient hook runs.
  // Empty: off.
  void set_param_ready_hook(std::function<void(const Tensor& param)> fn);
  // Graph mode: called after each launch of a captured training step, whose gradient
  // hooks ran inside the capture and so are not called again: data-parallel training
  // bounds the launched collectives here (its watchdog). Empty: nothing is called.
  void set_graph_launch_hook(std::function<void()> fn) { graph_launch_hook_ = std::move(fn); }

 protected:
  virtual void drop_captured_steps() {}
  void run_gradient_hook() {
    if (gradient_hook_) gradient_hook_();
  }
  void run_graph_launch_hook() {
    if (graph_launch_hook_) graph_launch_hook_();
  }
  std::string describe_;
  Shape latest_input_sizes_;
  std::function<void()> gradient_hook_, graph_launch_hook_;
  std::function<void(const Tensor&)> param_ready_;
};

// `backend` empty: the best available (backends::Registry::best).
std::unique_ptr<Model> make_resnet(const ResNetConfig& c, ops::DispatchMode mode = ops::DispatchMode::virtual_call,
                                   std::string_view backend = {}, const ModelOptions& o = {});
std::unique_ptr<Model> make_lenet(const LeNetConfig& c, ops::DispatchMode mode = ops::DispatchMode::virtual_call,
                                  std::string_view backend = {}, const ModelOptions& o = {});
// GPT-2's layers (nn/layers/transformer.h): inputs are token ids i64 [B, T], the logits
// [B, T, vocab], and cross_entropy's targets the next ids [B, T] (each position one example).
// Every dispatch mode, bitwise alike (graph mode on cuda). ModelOptions::compute_dtype is the
// config's compute_dtype (mixed precision: nn/layers/transformer.h); the two may not disagree.
std::unique_ptr<Model> make_gpt(const GptConfig& c, ops::DispatchMode mode = ops::DispatchMode::virtual_call,
                                std::string_view backend = {}, const ModelOptions& o = {});

namespace detail {
// The Model over `net` for policy P (explicitly instantiated for every policy of the
// build); `what` and `init` go into describe(); `mode` is P's, or graph over Direct<Impl>.
template <class P>
std::unique_ptr<Model> wrap_module(const P& p, std::unique_ptr<Module> net, DType dtype, const ModelOptions& o,
                                   const std::string& what, const std::string& init, ops::DispatchMode mode);
}  // namespace detail

}  // namespace strata::nn
