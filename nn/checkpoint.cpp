#include "nn/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace strata::nn {

void save_checkpoint(const std::string& path, const Module& model, const Optimizer* optimizer, int64_t step,
                     const safetensors::Metadata& extra) {
  StateDict all = model.state_dict();
  safetensors::Metadata meta = extra;
  meta["format"] = "pt";
  meta["strata.step"] = std::to_string(step);
  meta["strata.model"] = std::string(model.type_name());
  if (optimizer) {
    for (auto& [n, t] : optimizer->state_dict()) all.emplace_back(std::string(kOptimizerPrefix) + n, t);
    meta["strata.optimizer"] = optimizer->describe();
    meta["strata.optimizer_steps"] = std::to_string(optimizer->step_count());
    char lr[64];
    std::snprintf(lr, sizeof lr, "%.17g", optimizer->lr());
    meta["strata.optimizer_lr"] = lr;
  }
  safetensors::save(path, all, meta);
}

namespace {
int64_t parse_int(const safetensors::Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) return 0;
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    STRATA_CHECK(used == it->second.size(), "");
    return v;
  } catch (...) {
    STRATA_FAIL("checkpoint: ", path, ": metadata '", key, "' = '", it->second, "' is not an integer");
  }
}
}  // namespace

CheckpointInfo load_checkpoint(const std::string& path, Module& model, Optimizer* optimizer) {
  safetensors::Contents c = safetensors::load(path);
  StateDict weights, optim;
  for (auto& [n, t] : c.tensors) {
    if (n.rfind(kOptimizerPrefix, 0) == 0)
      optim.emplace_back(n.substr(kOptimizerPrefix.size()), std::move(t));
    else
      weights.emplace_back(n, std::move(t));
  }
  CheckpointInfo info;
  info.metadata = c.metadata;
  info.step = parse_int(c.metadata, "strata.step", path);
  if (optimizer)
    STRATA_CHECK(c.metadata.count("strata.optimizer_steps"), "checkpoint: ", path,
                 " holds no optimizer state (saved without an optimizer)");
  // Metadata is checked before any tensor is written, like the tensors themselves.
  const int64_t optimizer_steps = optimizer ? parse_int(c.metadata, "strata.optimizer_steps", path) : 0;
  auto lr_it = c.metadata.find("strata.optimizer_lr");
  double lr = optimizer ? optimizer->lr() : 0.0;
  if (optimizer && lr_it != c.metadata.end()) {
    char* end = nullptr;
    lr = std::strtod(lr_it->second.c_str(), &end);
    STRATA_CHECK(end != lr_it->second.c_str() && *end == '\0' && std::isfinite(lr) && lr >= 0, "checkpoint: ",
                 path, ": metadata 'strata.optimizer_lr' = '", lr_it->second, "' is not a learning rate");
  }
  try {
    model.load_state_dict(weights, true);
    if (optimizer) optimizer->load_state_dict(optim);
  } catch (const Error& e) {
    STRATA_FAIL("checkpoint: ", path, ": ", e.what());
  }
  if (optimizer) {
    optimizer->set_lr(lr);
    optimizer->set_step_count(optimizer_steps);
  }
  return info;
}

}  // namespace strata::nn
