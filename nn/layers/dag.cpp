#include "strata/nn/layers/dag.h"

namespace strata::nn {

template <class P>
void Dag<P>::check_value(int v, const char* what) const {
  STRATA_CHECK(v >= 0 && v < num_values(), "Dag: ", what, " ", v, " is not a value of this graph (it has ",
               num_values(), ": the input and one per step)");
}

template <class P>
int Dag<P>::add_module(std::string name, std::unique_ptr<Module> m, int input) {
  check_value(input, "input value");
  Module& ref = register_module(std::move(name), std::move(m));
  if (input == kInput) ref.set_input_grad(input_grad_);
  Step s;
  s.module = &ref;
  s.a = input;
  steps_.push_back(std::move(s));
  return num_values() - 1;
}

template <class P>
int Dag<P>::add_sum(int a, int b) {
  check_value(a, "first summand");
  check_value(b, "second summand");
  Step s;
  s.a = a;
  s.b = b;
  s.add = std::make_unique<ResidualAdd<P>>(p_);
  steps_.push_back(std::move(s));
  return num_values() - 1;
}

template <class P>
void Dag<P>::set_output(int value) {
  check_value(value, "output value");
  output_ = value;
}

template <class P>
void Dag<P>::set_input_grad(bool on) {
  input_grad_ = on;
  for (Step& s : steps_)
    if (s.module && s.a == kInput) s.module->set_input_grad(on);
}

template <class P>
Tensor Dag<P>::forward(const Tensor& x) {
  std::vector<Tensor> values(static_cast<size_t>(num_values()));
  values[0] = x;
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    values[i + 1] = s.module ? s.module->forward(values[static_cast<size_t>(s.a)])
                             : s.add->forward(values[static_cast<size_t>(s.a)], values[static_cast<size_t>(s.b)]);
  }
  return values[static_cast<size_t>(output())];
}

template <class P>
void Dag<P>::accumulate(std::vector<Tensor>& grads, std::vector<int>& arrived, int v, const Tensor& g) {
  if (!g.defined() || (v == kInput && !input_grad_)) return;
  Tensor& slot = grads[static_cast<size_t>(v)];
  const int k = arrived[static_cast<size_t>(v)]++;
  if (k == 0) {
    slot = g;
    return;
  }
  auto& adds = accumulators_[static_cast<size_t>(v)];
  while (static_cast<int>(adds.size()) < k) adds.push_back(std::make_unique<ResidualAdd<P>>(p_));
  slot = adds[static_cast<size_t>(k - 1)]->accumulate(slot, g);
}

template <class P>
Tensor Dag<P>::backward(const Tensor& dy) {
  return detail::explicit_backward<P>(*this, dy, [&] {
    const size_t n = static_cast<size_t>(num_values());
    accumulators_.resize(n);
    std::vector<Tensor> grads(n);
    std::vector<int> arrived(n, 0);
    accumulate(grads, arrived, output(), dy);
    for (size_t i = steps_.size(); i-- > 0;) {
      const Tensor g = grads[i + 1];
      if (!g.defined()) continue;
      Step& s = steps_[i];
      if (s.module) {
        accumulate(grads, arrived, s.a, s.module->backward(g));
      } else {
        accumulate(grads, arrived, s.a, g);
        accumulate(grads, arrived, s.b, g);
      }
    }
    return grads[0];
  });
}

#define STRATA_NN_INSTANTIATE(P) template class Dag<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
