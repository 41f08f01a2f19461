// A LibTorch user's first strata program: arithmetic with broadcasting, matmul, reductions
// over a dim, softmax, indexing and .backward(), then logistic regression trained by hand
// (autograd and plain tensor updates, no nn::Model).
#include <strata/strata.h>

#include <iostream>

using namespace strata;

int main() try {
  manual_seed(0);
  Tensor x = randn({4, 3});
  Tensor bias = Tensor::from_vector<float>({1, 0, -1}, {3});
  Tensor y = (x + bias) * 2.0;                 // [4,3] + [3]: broadcast
  Tensor g = y.matmul(y.t());                  // [4,4]
  Tensor p = g.softmax(-1);                    // rows sum to 1
  std::cout << "row sums " << p.sum(1) << "\n";
  std::cout << "argmax " << p.argmax(1) << "\n";
  Tensor firsts = x.index_select(0, Tensor::from_vector<int64_t>({0, 2}, {2}));
  std::cout << "rows 0 and 2 " << firsts << "\n";
  std::cout << "column 1 " << x.select(1, 1) << ", positive " << (x.select(1, 1) > 0.0) << "\n";

  // Logistic regression on two blobs, trained with autograd and tensor updates.
  Generator gen(1);
  Tensor inputs = cat({randn({64, 2}, gen) + 2.0, randn({64, 2}, gen) - 2.0}, 0);
  Tensor labels = cat({ones({64, 1}), zeros({64, 1})}, 0);
  Tensor w = zeros({2, 1}).set_requires_grad(true);
  Tensor b = zeros({1}).set_requires_grad(true);
  double first = 0, loss_value = 0;
  for (int step = 0; step < 100; ++step) {
    Tensor prob = (inputs.matmul(w) + b).sigmoid();
    Tensor loss = -(labels * prob.log() + (1.0 - labels) * (1.0 - prob).log()).mean();
    loss.backward();
    {
      autograd::NoGradGuard no_grad;  // the update is not part of the graph
      w = (w - 0.5 * w.grad()).set_requires_grad(true);
      b = (b - 0.5 * b.grad()).set_requires_grad(true);
    }
    loss_value = loss.item();
    if (step == 0) first = loss_value;
  }
  Tensor predicted = (inputs.matmul(w) + b > 0.0);
  const double accuracy = (predicted == labels.to(DType::u8)).to(DType::f32).mean().item();
  std::cout << "loss " << first << " -> " << loss_value << ", accuracy " << accuracy << "\n";
  return loss_value < 0.5 * first && accuracy > 0.9 ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
