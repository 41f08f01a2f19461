#include "strata/nn/lenet.h"

namespace strata::nn {

LeNetVariant parse_lenet_variant(std::string_view s) {
  if (s == "tensorflow") return LeNetVariant::tensorflow;
  if (s == "keras") return LeNetVariant::keras;
  STRATA_FAIL("LeNet: unknown variant '", s, "' (known: tensorflow, keras)");
}

std::string describe(const LeNetConfig& c) {
  return std::string("LeNet-5 (Gu, Gozum & Lam, ") + (c.variant == LeNetVariant::keras ? "Keras" : "TensorFlow") +
         " variant, " + std::to_string(c.num_classes) + " classes, " + std::to_string(c.in_channels) + "x" +
         std::to_string(c.input_size) + "x" + std::to_string(c.input_size) + " input)";
}

template <class P>
LeNet<P>::LeNet(const P& p, const LeNetConfig& c) : c_(c) {
  const bool keras = c.variant == LeNetVariant::keras;
  const int64_t k1 = keras ? 5 : 32, k2 = keras ? 12 : 64, hidden = keras ? 128 : 1024;
  const int pad = keras ? 0 : 2;  // 'valid' or 'same' for a 5x5 kernel
  int64_t side = c.input_size;
  auto after_conv_pool = [&](int64_t s) { return (s + 2 * pad - 4) / 2; };
  side = after_conv_pool(after_conv_pool(side));
  STRATA_CHECK(c.num_classes > 0 && c.in_channels > 0 && side > 0, "LeNet: input ", c.in_channels, "x",
               c.input_size, "x", c.input_size, " is too small for the ", keras ? "keras" : "tensorflow", " variant");
  Conv2dOptions co;
  co.padding = pad;
  co.dtype = c.dtype;
  LinearOptions lo;
  lo.dtype = c.dtype;
  conv1_ = &register_module("conv1", std::make_unique<Conv2d<P>>(p, c.in_channels, k1, 5, co));
  conv1_->set_input_grad(false);
  relu1_ = &register_module("relu1", std::make_unique<ReLU<P>>(p));
  pool1_ = &register_module("pool1", std::make_unique<MaxPool2d<P>>(p, 2));
  conv2_ = &register_module("conv2", std::make_unique<Conv2d<P>>(p, k1, k2, 5, co));
  relu2_ = &register_module("relu2", std::make_unique<ReLU<P>>(p));
  pool2_ = &register_module("pool2", std::make_unique<MaxPool2d<P>>(p, 2));
  if (keras) drop_conv_ = &register_module("dropout1", std::make_unique<Dropout<P>>(p, 0.25, c.dropout_seed));
  flatten_ = &register_module("flatten", std::make_unique<Flatten<P>>(p));
  fc1_ = &register_module("fc1", std::make_unique<Linear<P>>(p, k2 * side * side, hidden, lo));
  relu3_ = &register_module("relu3", std::make_unique<ReLU<P>>(p));
  drop_fc_ = &register_module(keras ? "dropout2" : "dropout",
                              std::make_unique<Dropout<P>>(p, keras ? 0.5 : 0.4, c.dropout_seed + 1));
  fc2_ = &register_module("fc2", std::make_unique<Linear<P>>(p, hidden, c.num_classes, lo));
  initialize(*this, c.init);
}

template <class P>
Tensor LeNet<P>::forward(const Tensor& x) {
  STRATA_CHECK(x.dim() == 4 && x.size(1) == c_.in_channels && x.size(2) == c_.input_size &&
                   x.size(3) == c_.input_size,
               "LeNet: input ", x.str(), " must be [N, ", c_.in_channels, ", ", c_.input_size, ", ", c_.input_size,
               "]");
  Tensor h = pool1_->forward(relu1_->forward(conv1_->forward(x)));
  h = pool2_->forward(relu2_->forward(conv2_->forward(h)));
  if (drop_conv_) h = drop_conv_->forward(h);
  h = relu3_->forward(fc1_->forward(flatten_->forward(h)));
  return fc2_->forward(drop_fc_->forward(h));
}

template <class P>
Tensor LeNet<P>::backward(const Tensor& dlogits) {
  return detail::explicit_backward<P>(*this, dlogits, [&] {
    Tensor g = drop_fc_->backward(fc2_->backward(dlogits));
    g = flatten_->backward(fc1_->backward(relu3_->backward(g)));
    if (drop_conv_) g = drop_conv_->backward(g);
    g = conv2_->backward(relu2_->backward(pool2_->backward(g)));
    return conv1_->backward(relu1_->backward(pool1_->backward(g)));
  });
}

#define STRATA_NN_INSTANTIATE(P) template class LeNet<P>;
STRATA_NN_INSTANTIATE_ALL()

}  // namespace strata::nn
