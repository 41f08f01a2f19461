#include "strata/nn/module.h"

#include <map>

namespace strata::nn {

const Tensor* find_entry(const StateDict& sd, std::string_view name) {
  for (const auto& [n, t] : sd)
    if (n == name) return &t;
  return nullptr;
}

Tensor Module::forward(const Tensor&) { STRATA_FAIL(type_name(), ": this module has no single-input forward"); }

Tensor Module::backward(const Tensor&) {
  STRATA_FAIL(type_name(), ": this module has no explicit backward (module-level backward runs in direct mode; "
              "in the tape modes call autograd::backward on the loss)");
}

void Module::train(bool on) {
  training_ = on;
  on_train(on);
  for (auto& [name, child] : children_) child->train(on);
  for (auto& m : unlisted_) m->train(on);
}

void Module::refresh_derived() {
  on_refresh_derived();
  for (auto& [name, child] : children_) child->refresh_derived();
  for (auto& m : unlisted_) m->refresh_derived();
}

void Module::set_grad_ready_hook(const std::function<void(const Module&)>& fn) {
  grad_ready_ = fn;
  for (auto& [name, child] : children_) child->set_grad_ready_hook(fn);
  for (auto& m : unlisted_) m->set_grad_ready_hook(fn);
}

const Tensor& Module::param(std::string_view name) const {
  for (const auto& [n, t] : params_)
    if (n == name) return t;
  STRATA_FAIL(type_name(), ": no parameter named '", name, "'");
}

const Tensor& Module::buffer(std::string_view name) const {
  for (const auto& [n, t] : buffers_)
    if (n == name) return t;
  STRATA_FAIL(type_name(), ": no buffer named '", name, "'");
}

Tensor& Module::register_parameter(std::string name, Tensor t) {
  STRATA_CHECK(t.defined(), type_name(), ": parameter '", name, "' is undefined");
  t.set_requires_grad(true);
  params_.emplace_back(std::move(name), std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(std::string name, Tensor t) {
  STRATA_CHECK(t.defined(), type_name(), ": buffer '", name, "' is undefined");
  buffers_.emplace_back(std::move(name), std::move(t));
  return buffers_.back().second;
}

void Module::add_child(std::string name, std::unique_ptr<Module> m) {
  STRATA_CHECK(m != nullptr, type_name(), ": child '", name, "' is null");
  for (const auto& [n, c] : children_) STRATA_CHECK(n != name, type_name(), ": two children named '", name, "'");
  children_.emplace_back(std::move(name), m.get());
  owned_.push_back(std::move(m));
}

void Module::collect(const std::string& prefix, bool params, bool buffers, StateDict& out) const {
  if (params)
    for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  if (buffers)
    for (const auto& [n, t] : buffers_) out.emplace_back(prefix + n, t);
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", params, buffers, out);
}

StateDict Module::named_parameters() const {
  StateDict out;
  collect("", true, false, out);
  return out;
}

StateDict Module::named_buffers() const {
  StateDict out;
  collect("", false, true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [n, c] : children_)
    for (auto& [cn, cm] : c->named_modules()) out.emplace_back(cn.empty() ? n : n + "." + cn, cm);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

StateDict Module::state_dict() const {
  StateDict out;
  collect("", true, true, out);
  return out;
}

void Module::load_state_dict(const StateDict& sd, bool strict) {
  const StateDict mine = state_dict();
  std::map<std::string_view, const Tensor*> given;
  std::vector<std::string> duplicated;
  for (const auto& [n, t] : sd)
    if (!given.emplace(n, &t).second) duplicated.push_back(n);

  std::vector<std::string> missing, unexpected, mismatched;
  std::map<std::string_view, bool> known;
  for (const auto& [n, t] : mine) {
    known.emplace(n, true);
    auto it = given.find(n);
    if (it == given.end()) {
      missing.push_back(n);
      continue;
    }
    const Tensor& src = *it->second;
    if (!src.defined())
      mismatched.push_back(n + ": the given tensor is undefined");
    else if (!(src.sizes() == t.sizes()))
      mismatched.push_back(n + ": shape " + src.sizes().str() + " in the state dict, " + t.sizes().str() +
                           " in the model");
  }
  for (const auto& [n, t] : sd)
    if (!known.count(n)) unexpected.push_back(n);

  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string("'") + v[i] + "'";
    return s;
  };
  std::string problems;
  if (!duplicated.empty()) problems += "\n  duplicated key(s): " + join(duplicated);
  if (strict && !missing.empty()) problems += "\n  missing key(s): " + join(missing);
  if (strict && !unexpected.empty()) problems += "\n  unexpected key(s): " + join(unexpected);
  for (const std::string& m : mismatched) problems += "\n  size mismatch for " + m;
  STRATA_CHECK(problems.empty(), "load_state_dict: error(s) loading a state dict of ", sd.size(),
               " entries into ", type_name(), " (", mine.size(), " entries):", problems);

  for (const auto& [n, t] : mine) {
    auto it = given.find(n);
    if (it != given.end() && !it->second->same(t)) copy_into(*it->second, t);
  }
  for (auto& [name, m] : named_modules()) m->on_load();
}

void Module::zero_grad() {
  for (Tensor& t : parameters()) t.set_grad(Tensor());
}

void Module::to_memory_format(MemoryFormat fmt) {
  for (const StateDict* sd : {&params_, &buffers_})
    for (const auto& [name, t] : *sd) {
      if (t.dim() != 4 || (fmt == MemoryFormat::channels_last ? t.is_channels_last() : t.is_contiguous())) continue;
      Tensor re = Tensor::empty(t.sizes(), t.dtype(), t.device(), fmt);
      copy_into(t, re);
      Tensor(t).set_data(re);
    }
  on_memory_format(fmt);
  for (const auto& c : children_) c.second->to_memory_format(fmt);
  for (const auto& c : unlisted_) c->to_memory_format(fmt);
}

void Module::repr_into(std::string& out, const std::string& name, int indent) const {
  out += std::string(indent, ' ') + (name.empty() ? "" : "(" + name + "): ") + std::string(type_name()) + "(" +
         extra_repr();
  if (children_.empty()) {
    out += ")\n";
    return;
  }
  out += "\n";
  for (const auto& [n, c] : children_) c->repr_into(out, n, indent + 2);
  out += std::string(indent, ' ') + ")\n";
}

std::string Module::repr() const {
  std::string out;
  repr_into(out, "", 0);
  return out;
}

std::string group_thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace strata::nn
