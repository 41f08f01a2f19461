#pragma once
// Internal to nn/model.cpp: graph mode's side of a Model, in one place. A Model in graph mode
// plans a step as direct mode the first time for a shape, captures it the second
// (capture_predict, capture_training) and launches the captured graph from then on
// (StepGraphs::find). What a layer may do while its step is recorded or captured is written
// down once, in ops/direct/graph_capture.h.
//
// A captured training step holds the optimizer's step too, so the optimizer takes part in
// the capture: begin_capture() before it (its kernels then read the learning rate and step
// counts from memory written before each launch), end_capture() after it (which parameters
// stepped), write_run_time_hyperparameters() before the first launch and advance_captured()
// before every later one. capture_training and relaunch_training are the only callers.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/nn/optim.h"
#include "strata/ops/direct/graph_capture.h"

namespace strata::nn::detail {

// A captured step and what it was captured with.
struct StepGraph {
  std::string key;
  std::unique_ptr<ops::direct::CapturedGraph> graph;
  Tensor input, targets;             // the buffers it reads, kept alive
  std::vector<Tensor> outputs;       // predict: {logits}; train_step: {loss, logits}
  Optimizer* opt = nullptr;          // train_step: the optimizer whose state the graph updates,
  uint64_t opt_epoch = 0;            // and its state_epoch() then
  std::vector<size_t> stepped{};     // train_step: the optimizer's slots the graph steps
  std::vector<std::pair<Tensor, Tensor>> grads{};  // train_step: each parameter and its gradient's buffer
};

// `step` (forward, loss, backward, gradient hook, optimizer step) captured with opt's part of
// the protocol above; the caller fills in the key, buffers, outputs and gradients.
template <class Impl, class Step>
StepGraph capture_training(Impl& impl, Optimizer& opt, Step&& step) {
  opt.begin_capture();
  StepGraph c;
  try {
    c.graph = ops::direct::capture_step(impl, std::forward<Step>(step));
  } catch (...) {
    opt.end_capture();
    throw;
  }
  c.opt = &opt;
  c.opt_epoch = opt.state_epoch();
  c.stepped = opt.end_capture();
  opt.write_run_time_hyperparameters();
  return c;
}

// One launch of a captured training step: the graph, then each gradient's buffer marked
// written (the replayed optimizer step wrote the parameters) and back in .grad().
inline void launch_training(StepGraph& c) {
  c.graph->launch();
  for (auto& [param, grad] : c.grads) {
    param.note_write();
    param.set_grad(grad);
  }
}

// A launch after the first: the optimizer's counts and learning rate move on first.
inline void relaunch_training(StepGraph& c) {
  c.opt->advance_captured(c.stepped);
  launch_training(c);
}

// The captured steps of one model, bounded like the plan caches (an evicted graph gives its
// memory pool back).
class StepGraphs {
 public:
  // The graph for `key` whose buffers (and optimizer state) are still the ones given; one
  // whose buffers moved (an evicted buffer, a replaced optimizer state) is dropped, and so is
  // a stale one (its backend gave back memory it replays: the cuda backend's cuDNN workspace,
  // when a call grew it), which is then captured again.
  StepGraph* find(const std::string& key, const Tensor& in, const Tensor& tg, const Optimizer* opt) {
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
      if (it->key != key) continue;
      auto same = [](const Tensor& a, const Tensor& b) {
        return a.defined() == b.defined() && (!a.defined() || a.data_ptr() == b.data_ptr());
      };
      if (same(it->input, in) && same(it->targets, tg) && it->opt == opt &&
          (opt == nullptr || it->opt_epoch == opt->state_epoch()) && !it->graph->stale())
        return &*it;
      graphs_.erase(it);
      return nullptr;
    }
    return nullptr;
  }
  StepGraph& add(StepGraph c) {
    constexpr size_t kGraphs = 8;
    if (graphs_.size() == kGraphs) graphs_.erase(graphs_.begin());
    graphs_.push_back(std::move(c));
    return graphs_.back();
  }
  void clear() { graphs_.clear(); }

 private:
  std::vector<StepGraph> graphs_;
};

}  // namespace strata::nn::detail
