// An outside program linking the installed strata: one relu and one backward pass. It has headers of its
// own named core/tensor.h and data/loader.h, as many projects do; strata's headers must not clash with them.
#include <strata/strata.h>

#include <cstdio>

#include "core/tensor.h"
#include "data/loader.h"

int main() {
  using namespace strata;
  ops::VirtualDispatch d(backends::registry().get("reference"));
  Tensor x = Tensor::from_vector<float>({-1.0f, 2.0f, 3.0f}, {3});
  x.set_requires_grad(true);
  Tensor loss = autograd::sum(d, autograd::relu(d, x));
  autograd::backward(loss);
  const auto g = x.grad().to_vector<float>();
  const consumer::Tensor own{1};
  const bool ok = loss.item() == 5.0 && g[0] == 0.0f && g[1] == 1.0f && g[2] == 1.0f && own.rank == 1 &&
                  consumer::batches_in(5, 2) == 3;
  std::printf("%s (loss %.1f, backends: %s)\n", ok ? "consumer ok" : "consumer WRONG", loss.item(),
              backends::registry().describe().c_str());
  return ok ? 0 : 1;
}
