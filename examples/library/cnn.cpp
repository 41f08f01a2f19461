// A small CNN trained on Fashion-MNIST for 200 steps (docs/library.md).
#include <strata/strata.h>

#include <iostream>

using namespace strata;

int main(int argc, char** argv) try {
  const auto mode = ops::parse_dispatch_mode(argc > 1 ? argv[1] : "virtual");
  const std::string dir = argc > 2 ? argv[2] : data::kDebianFashionMnistDir;
  auto train = std::make_shared<data::InMemoryDataset>(data::load_fashion_mnist(dir, data::Split::train));
  data::Loader loader(train, {.batch_size = 64, .transforms = {data::norm::fashion_mnist()}});
  auto model = nn::make_model([](const auto& p) {
    return nn::sequential(nn::conv2d(p, 1, 8, 3, {.padding = 1}), nn::relu(p), nn::max_pool2d(p, 2),
                          nn::conv2d(p, 8, 16, 3, {.padding = 1}), nn::relu(p), nn::max_pool2d(p, 2),
                          nn::flatten(p), nn::linear(p, 16 * 7 * 7, 10));
  }, mode);
  std::cout << model->describe() << "\n";
  auto opt = model->make_optimizer({.lr = 0.05, .momentum = 0.9});
  loader.start_epoch(0);
  double first = 0, loss = 0;
  for (int step = 0; step < 200; ++step) {
    const auto batch = loader.next();
    loss = model->train_step(batch->images, batch->targets, *opt).loss.item();
    if (step == 0) first = loss;
    if (step % 50 == 0) std::cout << "step " << step << "  loss " << loss << "\n";
  }
  std::cout << "loss " << first << " -> " << loss << "\n";
  return loss < 0.6 * first ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
