// Sizes at both ends: shapes whose element or byte count overflows int64,
// padding near INT_MAX, allocations no machine can satisfy, and zero-size dimensions.
// Overflow must be an error naming the sizes, never a wrapped-around small
// allocation; an impossible allocation must be a strata::Error naming the bytes, not
// std::bad_alloc or an abort; zero-size inputs must either work (an empty result of
// the right shape, the same on every backend) or be refused naming the op. After each
// failure the process must still compute correctly.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "strata/core/allocator.h"
#include "reliability_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define STRATA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_TEST_ASAN 1
#endif
#endif
#ifdef STRATA_TEST_ASAN
// AddressSanitizer aborts on an impossible malloc unless told to return null, which is
// what the C library does and what CpuAllocator turns into strata::Error.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace strata::testing {
namespace {

using D = ops::VirtualDispatch;

// A small computation whose result is known, run after each failure.
void expect_still_usable() {
  const Tensor a = Tensor::from_vector(std::vector<float>{1, -2, 3}, {3});
  const Tensor r = ops::relu(reference_dispatch(), a);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 0, 3}));
  const Tensor big = Tensor::empty({1 << 20}, DType::f32);  // 4 MB: the allocator still works
  EXPECT_EQ(big.nbytes(), size_t{4} << 20);
}

const int64_t k2p31 = int64_t{1} << 31;
const int64_t k2p62 = int64_t{1} << 62;

TEST(HugeSizes, ByteCountsThatOverflowAreErrorsNamingTheSizes) {
  EXPECT_STRATA_ERROR(Tensor::empty({k2p62, 4}), "Tensor::empty", "[4611686018427387904,4]", "overflows");
  EXPECT_STRATA_ERROR(Tensor::empty({k2p62}, DType::f64), "Tensor::empty", "f64", "overflows");
  EXPECT_STRATA_ERROR(Tensor::empty({INT64_MAX, 2}, DType::u8), "Tensor::empty", "overflows");
  // The element count overflows before a later zero would make it empty: still refused,
  // since numel() multiplies in this order.
  EXPECT_STRATA_ERROR(Tensor::empty({k2p31, k2p31, k2p31, 0}), "Tensor::empty", "overflows");
  EXPECT_STRATA_ERROR(Tensor::empty({3, -1}), "Tensor::empty", "negative size", "[3,-1]");
  EXPECT_STRATA_ERROR(ops::full(reference_dispatch(), {k2p62, k2p62}, DType::f32, 0.0), "overflows");
  expect_still_usable();
}

TEST(HugeSizes, ViewsCannotClaimMoreThanInt64CanCount) {
  const Tensor t = rnd({4});
  EXPECT_STRATA_ERROR(t.view({int64_t{1} << 40, int64_t{1} << 40}), "Tensor::view", "overflow");
  EXPECT_STRATA_ERROR(t.view({-2, -2}), "Tensor::view");
  // Stride-0 views repeat one element: legal, but the count must fit in 63 bits of bytes.
  EXPECT_STRATA_ERROR(t.as_strided({int64_t{1} << 32, int64_t{1} << 32}, {0, 0}, 0), "as_strided", "overflows");
  EXPECT_STRATA_ERROR(t.as_strided({k2p31, int64_t{1} << 30}, {0, 0}, 0), "as_strided", "f32", "overflows");
  EXPECT_STRATA_ERROR(t.as_strided({2, 2}, {INT64_MAX, 1}, 0), "as_strided");
  EXPECT_STRATA_ERROR(t.narrow(0, INT64_MAX, 1), "narrow", "out of bounds");
  EXPECT_STRATA_ERROR(t.narrow(0, 1, INT64_MAX), "narrow", "out of bounds");
  expect_still_usable();
}

TEST(HugeSizes, ParametersNearIntMaxAreErrorsNotOverflow) {
  const D d = reference_dispatch();
  ops::Conv2dParams cp;
  cp.pad_h = cp.pad_w = INT_MAX;  // an output of (2^32)^2 elements per channel
  EXPECT_STRATA_ERROR(ops::conv2d(d, rnd({1, 1, 1, 1}), rnd({1, 1, 1, 1}), Tensor(), cp), "conv2d", "too large",
                      "padding");
  ops::Conv2dParams dil;
  dil.dilation_h = INT_MAX;  // the window spans more than the input
  EXPECT_STRATA_ERROR(ops::conv2d(d, rnd({1, 1, 4, 4}), rnd({1, 1, 3, 3}), Tensor(), dil), "conv2d", "empty");
  ops::Pool2dParams pp;
  pp.kernel_h = pp.kernel_w = INT_MAX;
  pp.pad_h = pp.pad_w = INT_MAX / 2;
  // Legal, if odd: every window covers the whole 4x4 input and much padding. The
  // output extent must come out right (2), not wrapped, and the windows be clipped to
  // the input rather than iterated over (2^62 steps would hang).
  const Tensor x = rnd({1, 1, 4, 4});
  const Tensor y = ops::max_pool2d(d, x, pp);
  ASSERT_EQ(y.sizes(), (Shape{1, 1, 2, 2}));
  const auto xs = x.to_vector<float>();
  for (float v : y.to_vector<float>()) EXPECT_EQ(v, *std::max_element(xs.begin(), xs.end()));
  pp.pad_h = INT_MAX;  // 2 * pad would overflow int
  EXPECT_STRATA_ERROR(ops::avg_pool2d(d, rnd({1, 1, 4, 4}), pp), "avg_pool2d", "padding");
  EXPECT_STRATA_ERROR(ops::dropout(d, rnd({3}), std::nan(""), 1, 0), "dropout", "p must be");
  EXPECT_STRATA_ERROR(ops::batch_norm(d, rnd({2, 3}), rnd({3}), rnd({3}), rnd({3}), rnd({3}), true, 0.1, std::nan("")),
                      "batch_norm", "eps");
  expect_still_usable();
}

// No machine has 2^56 bytes (64 PiB); the request must fail however memory is
// overcommitted, and fail cleanly.
TEST(OutOfMemory, CpuAllocationFailureIsAStrataErrorNamingTheBytes) {
  // The same from inside an op, below: its output cannot be allocated (a stride-0 input
  // of 2^54 f32 elements has 4 bytes of storage).
  const Tensor huge = rnd({1}).as_strided({int64_t{1} << 27, int64_t{1} << 27}, {0, 0}, 0);
  const size_t before = cpu_allocator().stats().current_bytes;
  const int64_t n = int64_t{1} << 56;
  try {
    Tensor::empty({n}, DType::u8);
    FAIL() << "a 64 PiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_TRUE(message_contains(e.what(), {"out of memory", std::to_string(n).c_str(), "bytes"}));
  } catch (const std::exception& e) {
    FAIL() << "threw " << typeid(e).name() << " instead of strata::Error: " << e.what();
  }
  EXPECT_EQ(cpu_allocator().stats().current_bytes, before) << "a failed allocation is not counted";
  for (backends::Backend* b : cpu_backends()) {
    SCOPED_TRACE(b->name());
    EXPECT_STRATA_ERROR(ops::relu(D(*b), huge), "out of memory", "72057594037927936 bytes");
    EXPECT_STRATA_ERROR(ops::scale(D(*b), huge, 2.0), "out of memory");
  }
  EXPECT_EQ(cpu_allocator().stats().current_bytes, before);
  expect_still_usable();
}

// ---- zero-size dimensions -----------------------------------------------------------

struct EmptyCase {
  std::string name;
  std::function<std::vector<Tensor>(const D&)> call;
  // Either the output sizes a successful call must have, or the parts of the error.
  std::vector<Shape> out_sizes;
  std::vector<const char*> error;
};

std::vector<EmptyCase> empty_cases() {
  const Tensor none;
  ops::Conv2dParams cp;
  ops::Pool2dParams pp;
  auto ok = [](std::string n, auto f, std::vector<Shape> s) { return EmptyCase{std::move(n), f, std::move(s), {}}; };
  auto err = [](std::string n, auto f, std::vector<const char*> e) {
    return EmptyCase{std::move(n), f, {}, std::move(e)};
  };
  return {
      ok("relu of [0,3]",
         [](const D& d) {
           return std::vector{ops::relu(d, rnd({0, 3}))};
         },
         {{0, 3}}),
      ok("add of [3,0]",
         [](const D& d) {
           return std::vector{ops::add(d, rnd({3, 0}), rnd({3, 0}))};
         },
         {{3, 0}}),
      ok("scale of [0]", [](const D& d) { return std::vector{ops::scale(d, rnd({0}), 2.0)}; }, {{0}}),
      ok("sum of [0]", [](const D& d) { return std::vector{ops::sum(d, rnd({0}))}; }, {{}}),
      err("mean of [0]", [](const D& d) { return std::vector{ops::mean(d, rnd({0}))}; }, {"mean", "empty"}),
      ok("argmax of [0,3]",
         [](const D& d) {
           return std::vector{ops::argmax(d, rnd({0, 3}))};
         },
         {{0}}),
      err("argmax of [3,0]",
          [](const D& d) {
            return std::vector{ops::argmax(d, rnd({3, 0}))};
          },
          {"argmax", "no classes"}),
      ok("dropout of [0,4]",
         [](const D& d) {
           auto o = ops::dropout(d, rnd({0, 4}), 0.5, 1, 0);
           return std::vector{o.y, o.mask};
         },
         {{0, 4}, {0, 4}}),
      ok("copy of [0,2]",
         [](const D& d) {
           Tensor y = rnd({0, 2});
           ops::copy_(d, rnd({0, 2}), y);
           return std::vector{y};
         },
         {{0, 2}}),
      ok("sgd_step on [0]",
         [](const D& d) {
           Tensor p = rnd({0});
           ops::sgd_step_(d, p, rnd({0}), Tensor(), {});
           return std::vector{p};
         },
         {{0}}),
      err("linear with batch 0",
          [none](const D& d) {
            return std::vector{ops::linear(d, rnd({0, 5}), rnd({3, 5}), none)};
          },
          {"linear", "empty", "[0,5]"}),
      err("linear with 0 outputs",
          [](const D& d) {
            return std::vector{ops::linear(d, rnd({4, 5}), rnd({0, 5}), rnd({0}))};
          },
          {"linear", "empty", "[0,5]"}),
      err("linear with 0 inputs",
          [](const D& d) {
            return std::vector{ops::linear(d, rnd({4, 0}), rnd({3, 0}), rnd({3}))};
          },
          {"linear", "empty", "[4,0]"}),
      err("linear_bwd_data with batch 0",
          [](const D& d) {
            return std::vector{ops::linear_bwd_data(d, rnd({0, 3}), rnd({3, 5}))};
          },
          {"linear_bwd_data", "empty"}),
      err("linear_bwd_weight with batch 0",
          [](const D& d) {
            auto g = ops::linear_bwd_weight(d, rnd({0, 5}), rnd({0, 3}), true);
            return std::vector{g.dw, g.db};
          },
          {"linear_bwd_weight", "empty"}),
      ok("conv2d_bwd_bias with batch 0",
         [](const D& d) {
           return std::vector{ops::conv2d_bwd_bias(d, rnd({0, 4, 3, 3}))};
         },
         {{4}}),
      ok("relu_bwd of [0,3]",
         [](const D& d) {
           return std::vector{ops::relu_bwd(d, rnd({0, 3}), rnd({0, 3}))};
         },
         {{0, 3}}),
      ok("axpy on [0]",
         [](const D& d) {
           Tensor y = rnd({0});
           ops::axpy_(d, rnd({0}), y, 2.0);
           return std::vector{y};
         },
         {{0}}),
      ok("fill of [2,0]",
         [](const D& d) {
           Tensor y = rnd({2, 0});
           ops::fill_(d, y, 1.0);
           return std::vector{y};
         },
         {{2, 0}}),
      ok("adam_step on [0]",
         [](const D& d) {
           Tensor p = rnd({0}), m = rnd({0}), v = rnd({0});
           ops::adam_step_(d, p, rnd({0}), m, v, {}, 1);
           return std::vector{p, m, v};
         },
         {{0}, {0}, {0}}),
      err("conv2d with batch 0",
          [none, cp](const D& d) {
            return std::vector{ops::conv2d(d, rnd({0, 3, 6, 6}), rnd({4, 3, 3, 3}), none, cp)};
          },
          {"conv2d", "empty"}),
      err("conv2d with 0 channels",
          [none, cp](const D& d) {
            return std::vector{ops::conv2d(d, rnd({2, 0, 6, 6}), rnd({4, 0, 3, 3}), none, cp)};
          },
          {"conv2d", "0 channels"}),
      err("conv2d with 0 filters",
          [none, cp](const D& d) {
            return std::vector{ops::conv2d(d, rnd({2, 3, 6, 6}), rnd({0, 3, 3, 3}), none, cp)};
          },
          {"conv2d", "0 output channels"}),
      err("batch_norm of [0,3]",
          [](const D& d) {
            auto o = ops::batch_norm(d, rnd({0, 3}), rnd({3}), rnd({3}), rnd({3}), rnd({3}), false, 0.1, 1e-5);
            return std::vector{o.y};
          },
          {"batch_norm", "empty"}),
      err("max_pool2d of [0,3,4,4]",
          [pp](const D& d) {
            return std::vector{ops::max_pool2d(d, rnd({0, 3, 4, 4}), pp)};
          },
          {"max_pool2d", "empty"}),
      err("global_avg_pool of [2,3,0,4]",
          [](const D& d) {
            return std::vector{ops::global_avg_pool(d, rnd({2, 3, 0, 4}))};
          },
          {"global_avg_pool", "empty"}),
      err("softmax_xent of [0,10]",
          [](const D& d) {
            auto o = ops::softmax_xent(d, rnd({0, 10}), random_labels(0, 10, 1));
            return std::vector{o.loss};
          },
          {"softmax_xent", "batch of 0"}),
      err("softmax_xent with 0 classes",
          [](const D& d) {
            auto o = ops::softmax_xent(d, rnd({2, 0}), random_labels(2, 10, 1));
            return std::vector{o.loss};
          },
          {"softmax_xent", "0 classes"}),
      err("bce_logits of [0]", [](const D& d) { return std::vector{ops::bce_logits(d, rnd({0}), rnd({0}))}; },
          {"bce_logits", "empty"}),
  };
}

TEST(ZeroSize, EveryOpWorksOrRefusesClearlyAndBackendsAgree) {
  for (const EmptyCase& c : empty_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> reference_out;
    for (backends::Backend* b : cpu_backends()) {
      SCOPED_TRACE(b->name());
      try {
        const std::vector<Tensor> out = c.call(D(*b));
        ASSERT_TRUE(c.error.empty()) << "accepted; expected an error mentioning " << c.error.front();
        ASSERT_EQ(out.size(), c.out_sizes.size());
        for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].sizes(), c.out_sizes[i]) << out[i].str();
        if (b->name() == "reference")
          reference_out = out;
        else if (!reference_out.empty())
          expect_same_outputs(out, reference_out, false, "vs reference");
      } catch (const Error& e) {
        ASSERT_FALSE(c.error.empty()) << "refused: " << e.what();
        std::string missing;
        for (const char* p : c.error)
          if (std::string(e.what()).find(p) == std::string::npos) missing += std::string(" '") + p + "'";
        EXPECT_TRUE(missing.empty()) << "\"" << e.what() << "\" lacks" << missing;
      }
    }
    expect_still_usable();
  }
}

}  // namespace
}  // namespace strata::testing
