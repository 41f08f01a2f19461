#include "strata/nn/gpt_io.h"

#include <map>
#include <string>

#include "strata/nn/policy.h"

namespace strata::nn {

namespace {
bool is_conv1d(const std::string& name) {
  for (const char* end : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"})
    if (name.ends_with(end)) return true;
  return false;
}
}  // namespace

template <class P>
void load_hf_gpt2(Gpt<P>& m, const safetensors::Contents& contents, const std::string& source) {
  std::map<std::string, Tensor> file;
  for (const auto& [name, t] : contents.tensors) file.emplace(name, t);
  StateDict sd;
  std::string missing;
  for (const auto& [name, param] : m.named_parameters()) {
    const auto it = file.find("transformer." + name);
    if (it == file.end()) {
      missing += " transformer." + name;
      continue;
    }
    Tensor t = it->second;
    if (is_conv1d(name)) t = t.permute({1, 0}).contiguous();  // Conv1D [in, out] -> Linear [out, in]
    STRATA_CHECK(t.sizes() == param.sizes(), "load_hf_gpt2: ", source, ": tensor 'transformer.", name, "' is ",
                 it->second.sizes().str(), is_conv1d(name) ? " (Conv1D, [in, out])" : "", " but the model's ", name,
                 " is ", param.sizes().str());
    sd.emplace_back(name, t);
    file.erase(it);
  }
  STRATA_CHECK(missing.empty(), "load_hf_gpt2: ", source, " lacks", missing);
  // The output projection is wte's weight in GPT-2 (tied); a file may store it again.
  if (const auto head = file.find("lm_head.weight"); head != file.end()) {
    Tensor wte;
    for (const auto& [name, t] : contents.tensors)
      if (name == "transformer.wte.weight") wte = t;
    STRATA_CHECK(wte.defined() && head->second.sizes() == wte.sizes() &&
                     head->second.to_vector<double>() == wte.to_vector<double>(),
                 "load_hf_gpt2: ", source, ": lm_head.weight differs from transformer.wte.weight; strata's GPT "
                 "ties them");
    file.erase(head);
  }
  std::string unknown;
  for (const auto& [name, t] : file)
    if (!name.ends_with(".attn.bias") && !name.ends_with(".attn.masked_bias")) unknown += " " + name;
  STRATA_CHECK(unknown.empty(), "load_hf_gpt2: ", source, " holds tensors GPT-2 does not have:", unknown);
  m.load_state_dict(sd);
}

#define STRATA_NN_INSTANTIATE(P) \
  template void load_hf_gpt2<P>(Gpt<P>&, const safetensors::Contents&, const std::string&);
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
