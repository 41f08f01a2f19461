// An outside program linking the installed strata: one relu and one backward pass.
#include <cstdio>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "backends/api/registry.h"
#include "ops/dispatch.h"

int main() {
  using namespace strata;
  ops::VirtualDispatch d(backends::registry().get("reference"));
  Tensor x = Tensor::from_vector<float>({-1.0f, 2.0f, 3.0f}, {3});
  x.set_requires_grad(true);
  Tensor loss = autograd::sum(d, autograd::relu(d, x));
  autograd::backward(loss);
  const auto g = x.grad().to_vector<float>();
  const bool ok = loss.item() == 5.0 && g[0] == 0.0f && g[1] == 1.0f && g[2] == 1.0f;
  std::printf("%s (loss %.1f, backends: %s)\n", ok ? "consumer ok" : "consumer WRONG", loss.item(),
              backends::registry().describe().c_str());
  return ok ? 0 : 1;
}
