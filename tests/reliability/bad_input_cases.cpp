// The bad-input matrix's table (bad_input_cases.h).
#include "bad_input_cases.h"

#include <utility>

namespace strata::testing {

namespace {

Tensor with_extra_dim(const Tensor& t) {
  Shape s = t.sizes();
  s.push_back(1);
  return make_values(s, t.dtype(), 5);
}

Tensor labels4() { return random_labels(4, 10, 3); }
Tensor scalar(double v) { return Tensor::from_vector(std::vector<float>{static_cast<float>(v)}, Shape{}); }

}  // namespace

Tensor pos(const Shape& s) { return random_tensor(s, DType::f32, 11, 0.5, 1.5); }

std::vector<Tensor> run(const OpCase& c, const D& d, std::vector<Tensor> args) {
  for (size_t i = 0; i < args.size(); ++i)
    if (c.args[i].mutated && args[i].defined() && args[i].device().is_cpu()) args[i] = same_layout_copy(args[i]);
  return c.call(d, args);
}

std::vector<Tensor> valid_args(const OpCase& c) {
  std::vector<Tensor> v;
  for (const Arg& a : c.args) v.push_back(a.value);
  return v;
}

Tensor with_defect(const Arg& a, unsigned defect) {
  switch (defect) {
    case kRank:
      return with_extra_dim(a.value);
    case kSizes:
      return make_values(a.bad_sizes, a.value.dtype(), 6);
    case kDtype:
      return make_values(a.value.sizes(), a.bad_dtype, 7);
    case kDevice:
      return fake_device(a.value);
  }
  return Tensor();
}

std::string defect_name(unsigned d) {
  switch (d) {
    case kRank:
      return "wrong rank";
    case kSizes:
      return "mismatched sizes";
    case kDtype:
      return "wrong dtype";
    case kDevice:
      return "another device";
    case kUndefined:
      return "undefined tensor";
  }
  return "?";
}

std::vector<OpCase> all_cases() {
  const Conv2dParams cp;
  Pool2dParams pp;
  std::vector<OpCase> v;
  v.push_back({"conv2d",
               ops::OpId::conv2d_fwd,
               "conv2d",
               {{"input", rnd({2, 3, 6, 6}), kAll, {2, 5, 6, 6}},
                {"weight", rnd({4, 3, 3, 3}, DType::f32, 2), kAll, {4, 2, 3, 3}},
                {"bias", rnd({4}, DType::f32, 3), kAll & ~kUndefined, {5}}},
               [cp](const D& d, const auto& a) { return std::vector{ops::conv2d(d, a[0], a[1], a[2], cp)}; }});
  v.push_back({"conv2d_bwd_data",
               ops::OpId::conv2d_bwd_data,
               "conv2d",
               {{"grad_output", rnd({2, 4, 4, 4}), kAll, {2, 4, 5, 4}},
                {"weight", rnd({4, 3, 3, 3}, DType::f32, 2), kAll, {4, 2, 3, 3}}},
               [cp](const D& d, const auto& a) {
                 return std::vector{ops::conv2d_bwd_data(d, a[0], a[1], Shape{2, 3, 6, 6}, cp)};
               }});
  v.push_back({"conv2d_bwd_weight",
               ops::OpId::conv2d_bwd_weight,
               "conv2d",
               {{"input", rnd({2, 3, 6, 6}), kAll, {2, 5, 6, 6}},
                {"grad_output", rnd({2, 4, 4, 4}, DType::f32, 2), kAll, {2, 4, 5, 4}}},
               [cp](const D& d, const auto& a) {
                 return std::vector{ops::conv2d_bwd_weight(d, a[0], a[1], Shape{4, 3, 3, 3}, cp)};
               }});
  v.push_back({"conv2d_bwd_bias",
               ops::OpId::conv2d_bwd_bias,
               "conv2d_bwd_bias",
               {{"grad_output", rnd({2, 4, 3, 3}), kAll & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::conv2d_bwd_bias(d, a[0])}; }});
  v.push_back({"batch_norm",
               ops::OpId::batch_norm_fwd,
               "batch_norm",
               {{"input", rnd({2, 3, 4, 4}), kAll, {2, 4, 4, 4}},
                {"weight", rnd({3}, DType::f32, 2), kAll, {4}},
                {"bias", rnd({3}, DType::f32, 3), kAll, {4}},
                {"running_mean", rnd({3}, DType::f32, 4), kAll, {4}, DType::f64, true},
                {"running_var", pos({3}), kAll, {4}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 auto o = ops::batch_norm(d, a[0], a[1], a[2], a[3], a[4], true, 0.1, 1e-5);
                 return std::vector{o.y, o.save_mean, o.save_invstd, a[3], a[4]};
               }});
  v.push_back({"batch_norm_bwd",
               ops::OpId::batch_norm_bwd,
               "batch_norm_bwd",
               {{"input", rnd({2, 3, 4, 4}), kAll, {2, 3, 4, 5}},
                {"grad_output", rnd({2, 3, 4, 4}, DType::f32, 2), kAll, {2, 3, 4, 5}},
                {"weight", rnd({3}, DType::f32, 3), kAll, {4}},
                {"save_mean", rnd({3}, DType::f32, 4), kAll, {4}},
                {"save_invstd", pos({3}), kAll, {4}}},
               [](const D& d, const auto& a) {
                 auto g = ops::batch_norm_bwd(d, a[0], a[1], a[2], a[3], a[4], true);
                 return std::vector{g.dx, g.dgamma, g.dbeta};
               }});
  v.push_back({"relu",
               ops::OpId::relu_fwd,
               "relu",
               {{"input", rnd({2, 3}), kAnyRank & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::relu(d, a[0])}; }});
  v.push_back(
      {"relu_bwd",
       ops::OpId::relu_bwd,
       "relu_bwd",
       {{"output", rnd({2, 3}), kAnyRank, {2, 4}}, {"grad_output", rnd({2, 3}, DType::f32, 2), kAnyRank, {3, 2}}},
       [](const D& d, const auto& a) { return std::vector{ops::relu_bwd(d, a[0], a[1])}; }});
  v.push_back({"max_pool2d",
               ops::OpId::max_pool2d_fwd,
               "max_pool2d",
               {{"input", rnd({2, 3, 6, 6}), kAll & ~kSizes, {}, DType::i32}},
               [pp](const D& d, const auto& a) { return std::vector{ops::max_pool2d(d, a[0], pp)}; }});
  v.push_back({"max_pool2d_bwd",
               ops::OpId::max_pool2d_bwd,
               "max_pool2d_bwd",
               {{"input", rnd({2, 3, 6, 6}), kAll, {2, 3, 8, 8}},
                {"output", rnd({2, 3, 3, 3}, DType::f32, 2), kAll, {2, 3, 3, 4}},
                {"grad_output", rnd({2, 3, 3, 3}, DType::f32, 3), kAll, {2, 3, 4, 3}}},
               [pp](const D& d, const auto& a) { return std::vector{ops::max_pool2d_bwd(d, a[0], a[1], a[2], pp)}; }});
  v.push_back({"avg_pool2d",
               ops::OpId::avg_pool2d_fwd,
               "avg_pool2d",
               {{"input", rnd({2, 3, 6, 6}), kAll & ~kSizes, {}, DType::i32}},
               [pp](const D& d, const auto& a) { return std::vector{ops::avg_pool2d(d, a[0], pp)}; }});
  v.push_back({"avg_pool2d_bwd",
               ops::OpId::avg_pool2d_bwd,
               "avg_pool2d_bwd",
               {{"grad_output", rnd({2, 3, 3, 3}), kAll, {2, 3, 3, 4}, DType::i32},
                {"input", rnd({2, 3, 6, 6}, DType::f32, 2), kAll & ~kDtype, {2, 3, 8, 8}}},
               [pp](const D& d, const auto& a) { return std::vector{ops::avg_pool2d_bwd(d, a[0], a[1], pp)}; }});
  v.push_back({"global_avg_pool",
               ops::OpId::global_avg_pool_fwd,
               "global_avg_pool",
               {{"input", rnd({2, 3, 4, 4}), kAll & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::global_avg_pool(d, a[0])}; }});
  v.push_back({"global_avg_pool_bwd",
               ops::OpId::global_avg_pool_bwd,
               "global_avg_pool",
               {{"grad_output", rnd({2, 3}), kAnyRank, {2, 4}, DType::i32},
                {"input", rnd({2, 3, 4, 4}, DType::f32, 2), kAll & ~kDtype, {2, 4, 4, 4}}},
               [](const D& d, const auto& a) { return std::vector{ops::global_avg_pool_bwd(d, a[0], a[1])}; }});
  ops::SpaceToDepthParams sp;  // 2x2 blocks, padding 1: [2, 3, 6, 6] -> [2, 12, 4, 4]
  sp.pad_h = sp.pad_w = 1;
  sp.channels = 12;
  v.push_back({"space_to_depth",
               ops::OpId::space_to_depth_fwd,
               "space_to_depth",
               {{"input", rnd({2, 3, 6, 6}), kAll & ~kDtype, {2, 4, 6, 6}}},
               [sp](const D& d, const auto& a) { return std::vector{ops::space_to_depth(d, a[0], sp)}; }});
  v.push_back({"space_to_depth_bwd",
               ops::OpId::space_to_depth_bwd,
               "space_to_depth_bwd",
               {{"grad_output", rnd({2, 12, 4, 4}), kAll & ~kDtype, {2, 12, 4, 5}},
                {"input", rnd({2, 3, 6, 6}, DType::f32, 2), kAll & ~kDtype, {2, 4, 6, 6}}},
               [sp](const D& d, const auto& a) { return std::vector{ops::space_to_depth_bwd(d, a[0], a[1], sp)}; }});
  v.push_back({"linear",
               ops::OpId::linear_fwd,
               "linear",
               {{"input", rnd({4, 5}), kAll, {4, 6}},
                {"weight", rnd({3, 5}, DType::f32, 2), kAll, {3, 6}},
                {"bias", rnd({3}, DType::f32, 3), kAll & ~kUndefined, {4}}},
               [](const D& d, const auto& a) { return std::vector{ops::linear(d, a[0], a[1], a[2])}; }});
  v.push_back({"linear_bwd_data",
               ops::OpId::linear_bwd_data,
               "linear_bwd_data",
               {{"grad_output", rnd({4, 3}), kAll, {4, 2}}, {"weight", rnd({3, 5}, DType::f32, 2), kAll, {2, 5}}},
               [](const D& d, const auto& a) { return std::vector{ops::linear_bwd_data(d, a[0], a[1])}; }});
  v.push_back({"linear_bwd_weight",
               ops::OpId::linear_bwd_weight,
               "linear_bwd_weight",
               {{"input", rnd({4, 5}), kAll, {3, 5}}, {"grad_output", rnd({4, 3}, DType::f32, 2), kAll, {3, 3}}},
               [](const D& d, const auto& a) {
                 auto g = ops::linear_bwd_weight(d, a[0], a[1], true);
                 return std::vector{g.dw, g.db};
               }});
  v.push_back({"add",
               ops::OpId::add,
               "add",
               {{"a", rnd({2, 3}), kAnyRank, {3, 2}}, {"b", rnd({2, 3}, DType::f32, 2), kAnyRank, {2, 4}}},
               [](const D& d, const auto& a) { return std::vector{ops::add(d, a[0], a[1])}; }});
  // The formulas of pointwise.def, one of each family (their messages name the formula).
  v.push_back({"exp",
               ops::OpId::unary_fwd,
               "exp",
               {{"input", rnd({2, 3}), kAnyRank & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::exp(d, a[0])}; }});
  v.push_back({"tanh_bwd",
               ops::OpId::unary_bwd,
               "tanh",
               {{"input", rnd({2, 3}), kAnyRank, {3, 2}},
                {"output", rnd({2, 3}, DType::f32, 2), kAnyRank, {2, 4}},
                {"grad_output", rnd({2, 3}, DType::f32, 3), kAnyRank, {3, 3}}},
               [](const D& d, const auto& a) {
                 return std::vector{ops::unary_bwd(d, ops::UnaryFn::tanh, a[0], a[1], a[2])};
               }});
  v.push_back({"mul",
               ops::OpId::binary_fwd,
               "mul",
               {{"a", rnd({2, 3}), kAnyRank, {3, 2}}, {"b", rnd({2, 3}, DType::f32, 2), kAnyRank, {2, 4}}},
               [](const D& d, const auto& a) { return std::vector{ops::mul(d, a[0], a[1])}; }});
  v.push_back({"div_bwd",
               ops::OpId::binary_bwd,
               "div",
               {{"a", rnd({2, 3}), kAnyRank, {3, 2}},
                {"b", pos({2, 3}), kAnyRank, {2, 4}},
                {"output", rnd({2, 3}, DType::f32, 2), kAnyRank, {1, 6}},
                {"grad_output", rnd({2, 3}, DType::f32, 3), kAnyRank, {3, 3}}},
               [](const D& d, const auto& a) {
                 const ops::BinaryGrads g = ops::binary_bwd(d, ops::BinaryFn::div, a[0], a[1], a[2], a[3]);
                 return std::vector{g.da, g.db};
               }});
  v.push_back({"scale",
               ops::OpId::scale,
               "scale",
               {{"input", rnd({2, 3}), kAnyRank & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::scale(d, a[0], 2.5)}; }});
  v.push_back(
      {"axpy",
       ops::OpId::axpy,
       "axpy",
       {{"x", rnd({2, 3}), kAnyRank, {3, 2}}, {"y", rnd({2, 3}, DType::f32, 2), kAnyRank, {2, 4}, DType::f64, true}},
       [](const D& d, const auto& a) {
         ops::axpy_(d, a[0], a[1], 0.5);
         return std::vector{a[1]};
       }});
  v.push_back({"dropout",
               ops::OpId::dropout_fwd,
               "dropout",
               {{"input", rnd({2, 3}), kAnyRank & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) {
                 auto o = ops::dropout(d, a[0], 0.3, 1, 0);
                 return std::vector{o.y, o.mask};
               }});
  v.push_back(
      {"dropout_bwd",
       ops::OpId::dropout_bwd,
       "dropout_bwd",
       {{"grad_output", rnd({2, 3}), kAnyRank, {2, 4}, DType::i32},
        {"mask", ops::dropout(reference_dispatch(), rnd({2, 3}), 0.5, 2, 0).mask, kAnyRank, {3, 2}, DType::f32}},
       [](const D& d, const auto& a) { return std::vector{ops::dropout_bwd(d, a[0], a[1], 0.3)}; }});
  v.push_back({"softmax_xent",
               ops::OpId::softmax_xent_fwd,
               "softmax_xent",
               {{"logits", rnd({4, 10}), kAll, {5, 10}, DType::i32}, {"labels", labels4(), kAll, {5}, DType::i32}},
               [](const D& d, const auto& a) {
                 auto o = ops::softmax_xent(d, a[0], a[1]);
                 return std::vector{o.loss, o.lse};
               }});
  v.push_back({"softmax_xent_bwd",
               ops::OpId::softmax_xent_bwd,
               "softmax_xent",
               {{"logits", rnd({4, 10}), kAll, {5, 10}, DType::i32},
                {"lse", pos({4}), kAll, {5}},
                {"labels", labels4(), kAll, {5}, DType::i32},
                {"grad_output", scalar(1.0), kAnyRank, {2}}},
               [](const D& d, const auto& a) {
                 return std::vector{ops::softmax_xent_bwd(d, a[0], a[1], a[2], a[3])};
               }});
  v.push_back({"bce_logits",
               ops::OpId::bce_logits_fwd,
               "bce_logits",
               {{"logits", rnd({4, 3}), kAnyRank, {4, 2}}, {"targets", pos({4, 3}), kAnyRank, {3, 4}}},
               [](const D& d, const auto& a) { return std::vector{ops::bce_logits(d, a[0], a[1])}; }});
  v.push_back({"bce_logits_bwd",
               ops::OpId::bce_logits_bwd,
               "bce_logits",
               {{"logits", rnd({4, 3}), kAnyRank, {4, 2}},
                {"targets", pos({4, 3}), kAnyRank, {3, 4}},
                {"grad_output", scalar(0.5), kAnyRank, {2}}},
               [](const D& d, const auto& a) { return std::vector{ops::bce_logits_bwd(d, a[0], a[1], a[2])}; }});
  v.push_back({"sum",
               ops::OpId::sum,
               "sum",
               {{"input", rnd({2, 3}), kAnyRank & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::sum(d, a[0])}; }});
  v.push_back({"mean",
               ops::OpId::mean,
               "mean",
               {{"input", rnd({2, 3}), kAnyRank & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::mean(d, a[0])}; }});
  v.push_back({"argmax",
               ops::OpId::argmax,
               "argmax",
               {{"input", rnd({4, 10}), kAll & ~kSizes, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::argmax(d, a[0])}; }});
  add_tensor_api_cases(v);
  v.push_back({"fill",
               ops::OpId::fill,
               "fill",
               {{"output", rnd({2, 3}), kDevice | kUndefined, {}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::fill_(d, a[0], 1.5);
                 return std::vector{a[0]};
               }});
  v.push_back({"copy",
               ops::OpId::copy,
               "copy",
               {{"source", rnd({2, 3}), kAnyRank & ~kDtype, {3, 2}},
                {"destination", rnd({2, 3}, DType::f32, 2), kAnyRank & ~kDtype, {2, 4}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::copy_(d, a[0], a[1]);
                 return std::vector{a[1]};
               }});
  v.push_back(
      {"to", ops::OpId::copy, "copy", {{"source", rnd({2, 3}), kDevice | kUndefined}}, [](const D& d, const auto& a) {
         return std::vector{ops::to(d, a[0], DType::f64, Device::cpu(), MemoryFormat::contiguous)};
       }});
  v.push_back({"sgd_step",
               ops::OpId::sgd_step,
               "sgd_step",
               {{"param", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grad", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"momentum_buf", rnd({5}, DType::f32, 3), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::SgdOptions o;
                 o.momentum = 0.9;
                 o.weight_decay = 1e-4;
                 ops::sgd_step_(d, a[0], a[1], a[2], o);
                 return std::vector{a[0], a[2]};
               }});
  v.push_back({"adam_step",
               ops::OpId::adam_step,
               "adam_step",
               {{"param", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grad", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"exp_avg", rnd({5}, DType::f32, 3), kAnyRank, {6}, DType::f64, true},
                {"exp_avg_sq", pos({5}), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::adam_step_(d, a[0], a[1], a[2], a[3], ops::AdamOptions{}, 3);
                 return std::vector{a[0], a[2], a[3]};
               }});
  v.push_back({"multi_sgd_step",
               ops::OpId::multi_sgd_step,
               "multi_sgd_step",
               {{"params[0]", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[0]", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"momentum_bufs[0]", rnd({5}, DType::f32, 3), kAnyRank, {6}, DType::f64, true},
                {"params[1]", rnd({2, 3}, DType::f32, 4), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[1]", rnd({2, 3}, DType::f32, 5), kAnyRank, {3, 2}},
                {"momentum_bufs[1]", rnd({2, 3}, DType::f32, 6), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::SgdOptions o;
                 o.momentum = 0.9;
                 o.weight_decay = 1e-4;
                 ops::multi_sgd_step_(d, std::vector{a[0], a[3]}, std::vector{a[1], a[4]}, std::vector{a[2], a[5]}, o);
                 return std::vector{a[0], a[2], a[3], a[5]};
               }});
  v.push_back({"multi_adam_step",
               ops::OpId::multi_adam_step,
               "multi_adam_step",
               {{"params[0]", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[0]", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"exp_avgs[0]", rnd({5}, DType::f32, 3), kAnyRank, {6}, DType::f64, true},
                {"exp_avg_sqs[0]", pos({5}), kAnyRank, {6}, DType::f64, true},
                {"params[1]", rnd({2, 3}, DType::f32, 4), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[1]", rnd({2, 3}, DType::f32, 5), kAnyRank, {3, 2}},
                {"exp_avgs[1]", rnd({2, 3}, DType::f32, 6), kAnyRank, {6}, DType::f64, true},
                {"exp_avg_sqs[1]", pos({2, 3}), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::multi_adam_step_(d, std::vector{a[0], a[4]}, std::vector{a[1], a[5]}, std::vector{a[2], a[6]},
                                       std::vector{a[3], a[7]}, std::vector<int64_t>{3, 1}, ops::AdamOptions{});
                 return std::vector{a[0], a[2], a[3], a[4], a[6], a[7]};
               }});
  // RMSprop with momentum and centered (every state tensor read); its centered average
  // small enough that square_avg - grad_avg^2 stays positive.
  v.push_back({"rmsprop_step",
               ops::OpId::rmsprop_step,
               "rmsprop_step",
               {{"param", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grad", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"square_avg", pos({5}), kAnyRank, {6}, DType::f64, true},
                {"momentum_buf", rnd({5}, DType::f32, 3), kAnyRank, {6}, DType::f64, true},
                {"grad_avg", random_tensor({5}, DType::f32, 4, -0.5, 0.5), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::RmspropOptions o;
                 o.momentum = 0.9, o.centered = true, o.weight_decay = 1e-4;
                 ops::rmsprop_step_(d, a[0], a[1], a[2], a[3], a[4], o);
                 return std::vector{a[0], a[2], a[3], a[4]};
               }});
  v.push_back({"adagrad_step",
               ops::OpId::adagrad_step,
               "adagrad_step",
               {{"param", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grad", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"sum", pos({5}), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::AdagradOptions o;
                 o.lr_decay = 0.01;
                 ops::adagrad_step_(d, a[0], a[1], a[2], o, 3);
                 return std::vector{a[0], a[2]};
               }});
  v.push_back({"adadelta_step",
               ops::OpId::adadelta_step,
               "adadelta_step",
               {{"param", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grad", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"square_avg", pos({5}), kAnyRank, {6}, DType::f64, true},
                {"acc_delta", pos({5}), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::adadelta_step_(d, a[0], a[1], a[2], a[3], ops::AdadeltaOptions{});
                 return std::vector{a[0], a[2], a[3]};
               }});
  v.push_back({"multi_rmsprop_step",
               ops::OpId::multi_rmsprop_step,
               "multi_rmsprop_step",
               {{"params[0]", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[0]", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"square_avgs[0]", pos({5}), kAnyRank, {6}, DType::f64, true},
                {"momentum_bufs[0]", rnd({5}, DType::f32, 3), kAnyRank, {6}, DType::f64, true},
                {"params[1]", rnd({2, 3}, DType::f32, 4), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[1]", rnd({2, 3}, DType::f32, 5), kAnyRank, {3, 2}},
                {"square_avgs[1]", pos({2, 3}), kAnyRank, {6}, DType::f64, true},
                {"momentum_bufs[1]", rnd({2, 3}, DType::f32, 6), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::RmspropOptions o;
                 o.momentum = 0.9;
                 ops::multi_rmsprop_step_(d, std::vector{a[0], a[4]}, std::vector{a[1], a[5]}, std::vector{a[2], a[6]},
                                          std::vector{a[3], a[7]}, std::vector<Tensor>{}, o);
                 return std::vector{a[0], a[2], a[3], a[4], a[6], a[7]};
               }});
  v.push_back({"multi_adagrad_step",
               ops::OpId::multi_adagrad_step,
               "multi_adagrad_step",
               {{"params[0]", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[0]", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"sums[0]", pos({5}), kAnyRank, {6}, DType::f64, true},
                {"params[1]", rnd({2, 3}, DType::f32, 4), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[1]", rnd({2, 3}, DType::f32, 5), kAnyRank, {3, 2}},
                {"sums[1]", pos({2, 3}), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::multi_adagrad_step_(d, std::vector{a[0], a[3]}, std::vector{a[1], a[4]}, std::vector{a[2], a[5]},
                                          std::vector<int64_t>{3, 1}, ops::AdagradOptions{});
                 return std::vector{a[0], a[2], a[3], a[5]};
               }});
  v.push_back({"multi_adadelta_step",
               ops::OpId::multi_adadelta_step,
               "multi_adadelta_step",
               {{"params[0]", rnd({5}), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[0]", rnd({5}, DType::f32, 2), kAnyRank, {4}},
                {"square_avgs[0]", pos({5}), kAnyRank, {6}, DType::f64, true},
                {"acc_deltas[0]", pos({5}), kAnyRank, {6}, DType::f64, true},
                {"params[1]", rnd({2, 3}, DType::f32, 4), kAnyRank & ~kSizes, {}, DType::i32, true},
                {"grads[1]", rnd({2, 3}, DType::f32, 5), kAnyRank, {3, 2}},
                {"square_avgs[1]", pos({2, 3}), kAnyRank, {6}, DType::f64, true},
                {"acc_deltas[1]", pos({2, 3}), kAnyRank, {6}, DType::f64, true}},
               [](const D& d, const auto& a) {
                 ops::multi_adadelta_step_(d, std::vector{a[0], a[4]}, std::vector{a[1], a[5]},
                                           std::vector{a[2], a[6]}, std::vector{a[3], a[7]}, ops::AdadeltaOptions{});
                 return std::vector{a[0], a[2], a[3], a[4], a[6], a[7]};
               }});
  v.push_back({"amp_update_scale",
               ops::OpId::amp_update_scale,
               "amp_update_scale",
               {{"grad_sums", rnd({3}), kRank | kDtype | kDevice | kUndefined, {}, DType::i32},
                {"state", Tensor::from_vector<double>({1024.0, 3.0, 1.0, 0.0}, Shape{4}),
                 kRank | kSizes | kDtype | kDevice | kUndefined, {3}, DType::f32, true}},
               [](const D& d, const auto& a) {
                 ops::amp_update_scale_(d, a[0], a[1]);
                 return std::vector{a[1]};
               }});
  return v;
}

const std::vector<std::string> kCaseIds = {"conv2d",
                                           "conv2d_bwd_data",
                                           "conv2d_bwd_weight",
                                           "conv2d_bwd_bias",
                                           "batch_norm",
                                           "batch_norm_bwd",
                                           "relu",
                                           "relu_bwd",
                                           "max_pool2d",
                                           "max_pool2d_bwd",
                                           "avg_pool2d",
                                           "avg_pool2d_bwd",
                                           "global_avg_pool",
                                           "global_avg_pool_bwd",
                                           "space_to_depth",
                                           "space_to_depth_bwd",
                                           "linear",
                                           "linear_bwd_data",
                                           "linear_bwd_weight",
                                           "add",
                                           "exp",
                                           "tanh_bwd",
                                           "mul",
                                           "div_bwd",
                                           "scale",
                                           "axpy",
                                           "dropout",
                                           "dropout_bwd",
                                           "softmax_xent",
                                           "softmax_xent_bwd",
                                           "bce_logits",
                                           "bce_logits_bwd",
                                           "sum",
                                           "mean",
                                           "argmax",
                                           "eq",
                                           "where",
                                           "sum_dims",
                                           "softmax",
                                           "softmax_bwd",
                                           "bmm",
                                           "index_select",
                                           "index_add",
                                           "layer_norm",
                                           "layer_norm_bwd",
                                           "attention",
                                           "attention_bwd",
                                           "fill",
                                           "copy",
                                           "to",
                                           "sgd_step",
                                           "adam_step",
                                           "multi_sgd_step",
                                           "multi_adam_step",
                                           "rmsprop_step",
                                           "adagrad_step",
                                           "adadelta_step",
                                           "multi_rmsprop_step",
                                           "multi_adagrad_step",
                                           "multi_adadelta_step",
                                           "amp_update_scale"};

OpCase case_by_id(const std::string& id) {
  for (OpCase& c : all_cases())
    if (c.id == id) return std::move(c);
  return {};
}

}  // namespace strata::testing
