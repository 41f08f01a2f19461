#pragma once
// Internal to nn/: puts every module of a tree back in the train/eval state it had when the
// guard was made (modules may differ: a frozen batch norm in eval inside a network in
// training), for passes that switch the tree to eval (evaluate, describe(verbose)).
#include <utility>
#include <vector>

#include "strata/nn/module.h"

namespace strata::nn::detail {

class RestoreTraining {
 public:
  explicit RestoreTraining(Module& root) {
    for (const auto& [name, m] : root.named_modules()) saved_.emplace_back(m, m->is_training());
  }
  ~RestoreTraining() {
    for (const auto& [m, on] : saved_) m->train(on);  // parents first (train() recurses): a child's own state wins
  }
  RestoreTraining(const RestoreTraining&) = delete;
  RestoreTraining& operator=(const RestoreTraining&) = delete;

 private:
  std::vector<std::pair<Module*, bool>> saved_;
};

}  // namespace strata::nn::detail
