// The bad-input matrix: every function of the op front end, on every CPU
// backend of the build, against every defect a user's tensor can have — wrong rank,
// sizes that do not fit the other arguments, a wrong dtype, another device, an
// undefined tensor — one argument at a time. Each defect must be a strata::Error
// whose message names the op and the argument (sizes defects: the op and the
// offending shape), and the process must stay usable: the valid call right after
// gives bitwise the result it gave before. Non-contiguous inputs are supported by
// every op of every backend, so there the check is the other way round: the same
// values in a strided layout give the same result.
//
// Mixed devices: CI has no GPU, so "another device" is a tensor that claims cuda:0
// over borrowed host memory (as tests/ops do). A CPU backend must reject it before
// reading it: with a real GPU tensor that read would be a segfault, here it would be
// a silent success that the matrix catches.
// Direct mode: the plans of ops/direct/plans.h validate with the front end's own
// functions, so every defect a plan can see must give the front end's message, word
// for word (static dispatch runs the same front-end templates as virtual dispatch).
//
// tests/ops/op_errors*_test.cpp keep their hand-picked cases; this file is the
// systematic sweep. Zero-size and overflowing sizes are in huge_and_empty_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "reliability_util.h"
#include "strata/ops/direct/plans.h"
#include "strata/strata_generated/static_backends.h"

namespace strata::testing {
namespace {

using ops::Conv2dParams;
using ops::Pool2dParams;
using D = ops::VirtualDispatch;

enum Defect : unsigned { kRank = 1u, kSizes = 2u, kDtype = 4u, kDevice = 8u, kUndefined = 16u };
constexpr unsigned kAll = kRank | kSizes | kDtype | kDevice | kUndefined;
// Element-wise arguments: any rank, so only the other defects apply.
constexpr unsigned kAnyRank = kAll & ~kRank;

struct Arg {
  std::string name;  // as the op's messages call it
  Tensor value;      // a valid value
  unsigned rejects = 0;
  Shape bad_sizes = {};          // kSizes: sizes that do not fit the other arguments
  DType bad_dtype = DType::f64;  // kDtype (the valid tensors are f32, i64 labels or u8 masks)
  bool mutated = false;          // written in place: every call gets a fresh copy
};

struct OpCase {
  std::string id;  // the test's name
  ops::OpId table_op;
  std::string op;  // the name the messages start with
  std::vector<Arg> args;
  std::function<std::vector<Tensor>(const D&, const std::vector<Tensor>&)> call;
};

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

Tensor with_extra_dim(const Tensor& t) {
  Shape s = t.sizes();
  s.push_back(1);
  return make_values(s, t.dtype(), 5);
}

// A's value with `defect` (an undefined tensor for kUndefined).
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

// ---- the table --------------------------------------------------------------------

Tensor pos(const Shape& s) { return random_tensor(s, DType::f32, 11, 0.5, 1.5); }
Tensor labels4() { return random_labels(4, 10, 3); }
Tensor scalar(double v) { return Tensor::from_vector(std::vector<float>{static_cast<float>(v)}, Shape{}); }

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
                 return std::vector{o.loss, o.probs};
               }});
  v.push_back({"softmax_xent_bwd",
               ops::OpId::softmax_xent_bwd,
               "softmax_xent",
               {{"probs", pos({4, 10}), kAll, {5, 10}, DType::i32},
                {"labels", labels4(), kAll, {5}, DType::i32},
                {"grad_output", scalar(1.0), kAnyRank, {2}}},
               [](const D& d, const auto& a) { return std::vector{ops::softmax_xent_bwd(d, a[0], a[1], a[2])}; }});
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
  return v;
}

// ---- the sweep --------------------------------------------------------------------

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
                                           "linear",
                                           "linear_bwd_data",
                                           "linear_bwd_weight",
                                           "add",
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
                                           "fill",
                                           "copy",
                                           "to",
                                           "sgd_step",
                                           "adam_step"};

TEST(BadInputMatrixTable, CoversEveryOpOfTheTableAndEveryCaseRuns) {
  const std::vector<OpCase> cases = all_cases();
  std::vector<std::string> ids;
  for (const OpCase& c : cases) ids.push_back(c.id);
  EXPECT_EQ(ids, kCaseIds) << "keep kCaseIds in step with all_cases()";
  std::string missing;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    bool found = false;
    for (const OpCase& c : cases) found |= c.table_op == op;
    if (!found) missing += std::string(ops::op_name(op)) + " ";
  }
  EXPECT_TRUE(missing.empty()) << "ops of op_table.def without a row in the matrix: " << missing;
}

class BadInputMatrix : public ::testing::TestWithParam<std::string> {};

TEST_P(BadInputMatrix, EveryDefectIsAClearErrorAndTheProcessStaysUsable) {
  OpCase c;
  for (OpCase& k : all_cases())
    if (k.id == GetParam()) c = std::move(k);
  ASSERT_FALSE(c.id.empty()) << "no case " << GetParam();
  int errors_checked = 0, layouts_checked = 0;
  for (backends::Backend* b : cpu_backends()) {
    SCOPED_TRACE("backend " + std::string(b->name()) + ", op " + c.op);
    const D d(*b);
    const std::vector<Tensor> valid = valid_args(c);
    std::vector<Tensor> baseline;
    ASSERT_NO_THROW(baseline = run(c, d, valid)) << "the valid call fails";
    const auto still_usable = [&](const std::string& after) {
      std::vector<Tensor> again;
      ASSERT_NO_THROW(again = run(c, d, valid)) << "after " << after;
      expect_same_outputs(again, baseline, /*bitwise=*/true, "after " + after);
    };

    for (size_t i = 0; i < c.args.size(); ++i) {
      const Arg& a = c.args[i];
      for (unsigned defect : {kRank, kSizes, kDtype, kDevice, kUndefined}) {
        if (!(a.rejects & defect)) continue;
        std::vector<Tensor> args = valid;
        const Tensor bad = with_defect(a, defect);
        args[i] = bad;
        const std::string what = defect_name(defect) + " for '" + a.name + "' (" + bad.str() + ")";
        std::vector<const char*> parts{c.op.c_str()};
        const std::string shape = bad.defined() ? bad.sizes().str() : "";
        if (defect == kSizes) parts.push_back(shape.c_str());
        if (defect == kDevice) parts.push_back("cuda:0");
        try {
          run(c, d, args);
          ADD_FAILURE() << what << " was accepted";
        } catch (const Error& e) {
          const std::string msg = e.what();
          for (const char* p : parts) {
            EXPECT_NE(msg.find(p), std::string::npos) << what << ": \"" << msg << "\" lacks " << p;
          }
          if (defect != kSizes) {
            EXPECT_TRUE(names_word(msg, a.name)) << what << ": \"" << msg << "\" does not name '" << a.name << "'";
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << " threw a " << typeid(e).name() << ", not strata::Error: " << e.what();
        }
        ++errors_checked;
        still_usable(what);
      }
      // Strided copies of the same values: every backend takes any strides.
      if (a.value.dim() >= 1 && a.value.numel() > 1) {
        std::vector<Tensor> args = valid;
        args[i] = noncontiguous(a.value);
        ASSERT_FALSE(args[i].is_contiguous());
        std::vector<Tensor> out;
        ASSERT_NO_THROW(out = run(c, d, args)) << "non-contiguous '" << a.name << "'";
        // oneDNN/OpenBLAS may pick another kernel for another layout: same values up to rounding.
        expect_same_outputs(out, baseline, b->name() == "reference", "non-contiguous '" + a.name + "'");
        ++layouts_checked;
      }
    }
  }
  std::printf("%s: %d defects rejected, %d strided layouts checked, over %zu backends\n", c.id.c_str(), errors_checked,
              layouts_checked, cpu_backends().size());
  EXPECT_GT(errors_checked + layouts_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Ops, BadInputMatrix, ::testing::ValuesIn(kCaseIds),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---- direct mode ------------------------------------------------------------------

// The case's arguments its direct-mode plan takes as they are. A forward plan takes
// all of them; a backward plan is planned after a valid forward and takes only
// grad_output (its other inputs are the forward plan's own). Cases without a plan
// (optimizer steps, element-wise ops other than relu and add, conversions) and
// conv2d's bias gradient (validated after the weight gradient, as autograd does)
// have none.
std::vector<std::string> direct_args(const std::string& id) {
  if (id == "conv2d") return {"input", "weight", "bias"};
  if (id == "batch_norm") return {"input", "weight", "bias", "running_mean", "running_var"};
  if (id == "relu" || id == "max_pool2d" || id == "avg_pool2d" || id == "global_avg_pool") return {"input"};
  if (id == "linear") return {"input", "weight", "bias"};
  if (id == "add") return {"a", "b"};
  if (id == "softmax_xent") return {"logits", "labels"};
  if (id == "bce_logits") return {"logits", "targets"};
  if (id == "conv2d_bwd_data" || id == "conv2d_bwd_weight" || id == "batch_norm_bwd" || id == "relu_bwd" ||
      id == "max_pool2d_bwd" || id == "avg_pool2d_bwd" || id == "global_avg_pool_bwd" || id == "linear_bwd_data" ||
      id == "linear_bwd_weight")
    return {"grad_output"};
  return {};
}

// Plans case `id` on `impl` with the case's arguments `a` (in the case's order): the
// same call the front-end case makes, as a direct-mode network would plan it.
template <class Impl>
void plan_case(const std::string& id, Impl& impl, const std::vector<Tensor>& a) {
  namespace dp = ops::direct;
  const Conv2dParams cp;
  const Pool2dParams pp;
  if (id == "conv2d") {
    dp::Conv2dPlan<Impl>().plan(impl, a[0], a[1], a[2], cp);
  } else if (id == "conv2d_bwd_data") {
    dp::Conv2dPlan<Impl> p;
    p.plan(impl, rnd({2, 3, 6, 6}), a[1], Tensor(), cp);
    p.plan_backward(a[0], /*need_dx=*/true);
  } else if (id == "conv2d_bwd_weight") {
    dp::Conv2dPlan<Impl> p;
    p.plan(impl, a[0], rnd({4, 3, 3, 3}, DType::f32, 2), Tensor(), cp);
    p.plan_backward(a[1], /*need_dx=*/false);
  } else if (id == "batch_norm") {
    dp::BatchNormPlan<Impl>().plan(impl, a[0], a[1], a[2], a[3], a[4], true, 0.1, 1e-5);
  } else if (id == "batch_norm_bwd") {
    dp::BatchNormPlan<Impl> p;
    p.plan(impl, a[0], a[2], rnd({3}, DType::f32, 3), rnd({3}, DType::f32, 4), pos({3}), true, 0.1, 1e-5);
    p.plan_backward(a[1]);
  } else if (id == "relu") {
    dp::ReluPlan<Impl>().plan(impl, a[0]);
  } else if (id == "relu_bwd") {
    dp::ReluPlan<Impl> p;
    p.plan(impl, a[0]);
    p.plan_backward(a[1]);
  } else if (id == "max_pool2d") {
    dp::MaxPool2dPlan<Impl>().plan(impl, a[0], pp);
  } else if (id == "max_pool2d_bwd") {
    dp::MaxPool2dPlan<Impl> p;
    p.plan(impl, a[0], pp);
    p.plan_backward(a[2]);
  } else if (id == "avg_pool2d") {
    dp::AvgPool2dPlan<Impl>().plan(impl, a[0], pp);
  } else if (id == "avg_pool2d_bwd") {
    dp::AvgPool2dPlan<Impl> p;
    p.plan(impl, a[1], pp);
    p.plan_backward(a[0]);
  } else if (id == "global_avg_pool") {
    dp::GlobalAvgPoolPlan<Impl>().plan(impl, a[0]);
  } else if (id == "global_avg_pool_bwd") {
    dp::GlobalAvgPoolPlan<Impl> p;
    p.plan(impl, a[1]);
    p.plan_backward(a[0]);
  } else if (id == "linear") {
    dp::LinearPlan<Impl>().plan(impl, a[0], a[1], a[2]);
  } else if (id == "linear_bwd_data") {
    dp::LinearPlan<Impl> p;
    p.plan(impl, rnd({4, 5}), a[1], Tensor());
    p.plan_backward(a[0], /*need_dx=*/true);
  } else if (id == "linear_bwd_weight") {
    dp::LinearPlan<Impl> p;
    p.plan(impl, a[0], rnd({3, 5}, DType::f32, 2), Tensor());
    p.plan_backward(a[1], /*need_dx=*/false);
  } else if (id == "add") {
    dp::AddPlan<Impl>().plan(impl, a[0], a[1]);
  } else if (id == "softmax_xent") {
    dp::SoftmaxXentPlan<Impl>().plan(impl, a[0], a[1]);
  } else if (id == "bce_logits") {
    dp::BceLogitsPlan<Impl>().plan(impl, a[0], a[1]);
  } else {
    FAIL() << "no plan for case " << id;
  }
}

// The message of the strata::Error that fn throws; a test failure if it throws none.
template <class Fn>
std::string error_of(Fn&& fn, const std::string& what) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw a " << typeid(e).name() << ", not strata::Error: " << e.what();
    return {};
  }
  ADD_FAILURE() << what << " was accepted";
  return {};
}

// Every defect of every argument a plan takes, on backend Impl: the plan rejects it
// with the front end's message. Returns the number of defects checked.
template <class Impl>
int check_direct(const OpCase& c, const std::vector<std::string>& names) {
  if constexpr (Impl::kDevice != DeviceType::cpu) {
    return 0;
  } else {
    if (Impl::kName == "null" || backends::registry().find(Impl::kName) == nullptr) return 0;
    SCOPED_TRACE("direct mode on backend " + std::string(Impl::kName) + ", op " + c.op);
    Impl& impl = backends::registry().impl<Impl>();
    const D d(backends::registry().get(Impl::kName));
    const std::vector<Tensor> valid = valid_args(c);
    EXPECT_NO_THROW(plan_case(c.id, impl, valid)) << "the valid plan fails";
    int checked = 0;
    for (size_t i = 0; i < c.args.size(); ++i) {
      const Arg& a = c.args[i];
      if (std::find(names.begin(), names.end(), a.name) == names.end()) continue;
      for (unsigned defect : {kRank, kSizes, kDtype, kDevice, kUndefined}) {
        if (!(a.rejects & defect)) continue;
        std::vector<Tensor> args = valid;
        args[i] = with_defect(a, defect);
        const std::string what = defect_name(defect) + " for '" + a.name + "' (" + args[i].str() + ")";
        const std::string front = error_of([&] { run(c, d, args); }, "front end: " + what);
        const std::string direct = error_of([&] { plan_case(c.id, impl, args); }, "direct plan: " + what);
        EXPECT_EQ(direct, front) << what;
        ++checked;
      }
    }
    return checked;
  }
}

class BadInputMatrixDirect : public ::testing::TestWithParam<std::string> {};

TEST_P(BadInputMatrixDirect, EveryDefectGetsTheFrontEndsMessage) {
  OpCase c;
  for (OpCase& k : all_cases())
    if (k.id == GetParam()) c = std::move(k);
  ASSERT_FALSE(c.id.empty()) << "no case " << GetParam();
  const std::vector<std::string> names = direct_args(c.id);
  int checked = 0;
#define STRATA_CHECK_DIRECT(Impl) checked += check_direct<Impl>(c, names);
  STRATA_FOR_EACH_BACKEND(STRATA_CHECK_DIRECT)
#undef STRATA_CHECK_DIRECT
  std::printf("%s: %d defects rejected alike in direct mode\n", c.id.c_str(), checked);
  EXPECT_GT(checked, 0) << "no CPU backend or no defect of a plan's argument was checked";
}

// The cases that have a direct-mode plan.
std::vector<std::string> direct_case_ids() {
  std::vector<std::string> ids;
  for (const std::string& id : kCaseIds)
    if (!direct_args(id).empty()) ids.push_back(id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Ops, BadInputMatrixDirect, ::testing::ValuesIn(direct_case_ids()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace strata::testing
