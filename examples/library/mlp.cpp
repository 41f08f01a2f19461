// A two-layer MLP learns 256 random points' random labels (docs/library.md).
#include <strata/strata.h>

#include <iostream>

using namespace strata;

int main(int argc, char** argv) try {
  const auto mode = ops::parse_dispatch_mode(argc > 1 ? argv[1] : "virtual");
  Generator gen(0);
  const Tensor x = randn({256, 16}, gen), y = randint(0, 4, {256}, gen);
  auto model = nn::make_model(
      [](const auto& p) { return nn::sequential(nn::linear(p, 16, 64), nn::relu(p), nn::linear(p, 64, 4)); }, mode);
  std::cout << model->describe() << "\n";
  auto opt = model->make_optimizer({.lr = 0.1, .momentum = 0.9});
  double first = 0, loss = 0;
  for (int step = 0; step < 300; ++step) {
    loss = model->train_step(x, y, *opt).loss.item();
    if (step == 0) first = loss;
    if (step % 50 == 0) std::cout << "step " << step << "  loss " << loss << "\n";
  }
  std::cout << "loss " << first << " -> " << loss << "\n";
  return loss < 0.5 * first ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
