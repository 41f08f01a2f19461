#include "strata/nn/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata::nn {

namespace {

// NaN and infinity have every exponent bit set in every IEEE format; the mantissa
// tells them apart.
template <class Bits>
void count_bits(const void* data, int64_t n, Bits exponent, Bits mantissa, int64_t& nan, int64_t& inf) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
    if ((v & exponent) == exponent) ++((v & mantissa) ? nan : inf);
  }
}

std::string join_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

int64_t parse_int(const safetensors::Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) return 0;
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    STRATA_CHECK(used == it->second.size() && v >= 0, "");
    return v;
  } catch (...) {
    STRATA_FAIL("checkpoint: ", path, ": metadata '", key, "' = '", it->second,
                "' is not a count (a non-negative integer below 2^63)");
  }
}

}  // namespace

std::vector<std::string> non_finite_tensors(const StateDict& tensors) {
  std::vector<std::string> out;
  for (const auto& [name, t] : safetensors::to_host(tensors)) {
    if (!t.defined() || !is_floating(t.dtype())) continue;
    int64_t nan = 0, inf = 0;
    switch (t.dtype()) {
      case DType::f64: count_bits<uint64_t>(t.data_ptr(), t.numel(), 0x7ff0000000000000ull, 0x000fffffffffffffull, nan, inf); break;
      case DType::f32: count_bits<uint32_t>(t.data_ptr(), t.numel(), 0x7f800000u, 0x007fffffu, nan, inf); break;
      case DType::f16: count_bits<uint16_t>(t.data_ptr(), t.numel(), 0x7c00, 0x03ff, nan, inf); break;
      case DType::bf16: count_bits<uint16_t>(t.data_ptr(), t.numel(), 0x7f80, 0x007f, nan, inf); break;
      default: break;
    }
    if (nan + inf > 0)
      out.push_back("'" + name + "' holds " + std::to_string(nan) + " NaN and " + std::to_string(inf) +
                    " infinite of its " + std::to_string(t.numel()) + " values");
  }
  return out;
}

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
  // Copied to the host once: checked here, written as is by safetensors::save.
  const StateDict host = safetensors::to_host(all);
  const std::vector<std::string> bad = non_finite_tensors(host);
  STRATA_CHECK(bad.empty(), "checkpoint: refusing to save '", path, "' at step ", step, ": ", join_lines(bad),
               " (the run has diverged); the previous file at that path, if any, is kept");
  safetensors::save(path, host, meta);
}

CheckpointInfo load_checkpoint(const std::string& path, Module& model, Optimizer* optimizer,
                               const LoadOptions& options) {
  return load_checkpoint(safetensors::load(path), path, model, optimizer, options);
}

CheckpointInfo load_checkpoint(const safetensors::Contents& c, const std::string& path, Module& model,
                               Optimizer* optimizer, const LoadOptions& options) {
  StateDict weights, optim;
  for (const auto& [n, t] : c.tensors) {
    if (n.rfind(kOptimizerPrefix, 0) == 0)
      optim.emplace_back(n.substr(kOptimizerPrefix.size()), t);
    else
      weights.emplace_back(n, t);
  }
  CheckpointInfo info;
  info.metadata = c.metadata;
  info.step = parse_int(c.metadata, "strata.step", path);
  if (optimizer)
    STRATA_CHECK(c.metadata.count("strata.optimizer_steps"), "checkpoint: ", path,
                 " holds no optimizer state (saved without an optimizer)");
  // Metadata and values are checked before any tensor is written, like the shapes.
  const int64_t optimizer_steps = optimizer ? parse_int(c.metadata, "strata.optimizer_steps", path) : 0;
  auto lr_it = c.metadata.find("strata.optimizer_lr");
  double lr = optimizer ? optimizer->lr() : 0.0;
  if (optimizer && lr_it != c.metadata.end()) {
    char* end = nullptr;
    lr = std::strtod(lr_it->second.c_str(), &end);
    STRATA_CHECK(end != lr_it->second.c_str() && *end == '\0' && std::isfinite(lr) && lr >= 0, "checkpoint: ",
                 path, ": metadata 'strata.optimizer_lr' = '", lr_it->second, "' is not a learning rate");
  }
  std::vector<std::string> bad = non_finite_tensors(weights);
  if (optimizer)
    for (std::string& s : non_finite_tensors(optim)) bad.push_back("optimizer state " + s);
  STRATA_CHECK(bad.empty() || options.allow_non_finite, "checkpoint: ", path, ": ", join_lines(bad),
               ": it was saved from a diverged run (refused; ", options.allow_with, " loads it anyway)");
  for (const std::string& s : bad) info.warnings.push_back("checkpoint " + path + ": " + s);
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
