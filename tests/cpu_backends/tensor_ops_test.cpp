// The tensor API's ops (compare, where, reduce_dims, softmax, bmm, index_select, index_add) on
// each production CPU backend against the reference backend, in f32 and f64, on contiguous,
// transposed and broadcast (stride 0) operands, size-1 and odd dims.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu_backend_test_util.h"
#include "strata/core/factories.h"
#include "support/coverage.h"

namespace strata::testing {
namespace {

STRATA_COVERS(compare, "vs_reference");
STRATA_COVERS(where, "vs_reference");
STRATA_COVERS(reduce_dims, "vs_reference");
STRATA_COVERS(softmax_fwd, "vs_reference");
STRATA_COVERS(softmax_bwd, "vs_reference");
STRATA_COVERS(bmm, "vs_reference");
STRATA_COVERS(index_select, "vs_reference");
STRATA_COVERS(index_add, "vs_reference");

class CpuTensorOps : public CpuBackendTest {};

Tensor rand_dt(const Shape& s, DType dt, uint64_t seed) { return random_tensor(s, dt, seed); }
// x [a, b] seen transposed as [b, a] (strided).
Tensor transposed(const Shape& s, DType dt, uint64_t seed) {
  return random_tensor({s[1], s[0]}, dt, seed).permute({1, 0});
}
// The rows of a [1, n] tensor repeated m times (stride 0).
Tensor broadcast_rows(int64_t m, int64_t n, DType dt, uint64_t seed) {
  const Tensor r = random_tensor({1, n}, dt, seed);
  return r.as_strided({m, n}, {0, 1}, r.offset());
}
std::string what(const char* op, DType dt, const std::string& extra) {
  return std::string(op) + " " + std::string(dtype_name(dt)) + " " + extra;
}

TEST_P(CpuTensorOps, ComparisonsMatchTheReference) {
  for (DType dt : {DType::f32, DType::f64, DType::i64, DType::i32}) {
    const bool is_int = dt == DType::i64 || dt == DType::i32;
    const Tensor a = is_int ? randint(0, 3, {5, 7}, dt) : rand_dt({5, 7}, dt, 1);
    // b shares a few values with a, so eq/le/ge have true and false answers.
    Tensor b = a.clone();
    if (!is_int) b = rand_dt({7, 5}, dt, 2).permute({1, 0});
    if (!is_int) copy_into(a.narrow(0, 0, 2), b.narrow(0, 0, 2));
    for (auto fn : {ops::CompareFn::eq, ops::CompareFn::ne, ops::CompareFn::lt, ops::CompareFn::le,
                    ops::CompareFn::gt, ops::CompareFn::ge}) {
      const Tensor y = Tensor::empty({5, 7}, DType::u8), y_ref = Tensor::empty({5, 7}, DType::u8);
      be().compare({a, b, y, fn});
      ref_.compare({a, b, y_ref, fn});
      EXPECT_EQ(y.to_vector<int>(), y_ref.to_vector<int>()) << what("compare", dt, std::string(ops::compare_name(fn)));
    }
  }
}

TEST_P(CpuTensorOps, WhereMatchesTheReference) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor c = randint(0, 2, {6, 5}, DType::u8);
    const Tensor a = transposed({6, 5}, dt, 3), b = broadcast_rows(6, 5, dt, 4);
    const Tensor y = nan_tensor({6, 5}, kNCHW, dt), y_ref = nan_tensor({6, 5}, kNCHW, dt);
    be().where({c, a, b, y});
    ref_.where({c, a, b, y_ref});
    STRATA_EXPECT_CLOSE(y, y_ref, 0.0, what("where", dt, ""));
  }
}

TEST_P(CpuTensorOps, ReductionsOverDimsMatchTheReference) {
  const std::vector<std::vector<int>> dim_sets = {{0}, {1}, {2}, {0, 2}, {0, 1, 2}, {}};
  for (DType dt : {DType::f32, DType::f64})
    for (bool strided : {false, true})
      for (const auto& dims : dim_sets)
        for (auto fn : {ops::ReduceFn::sum, ops::ReduceFn::mean, ops::ReduceFn::max, ops::ReduceFn::min,
                        ops::ReduceFn::argmax, ops::ReduceFn::argmin}) {
          const bool arg = fn == ops::ReduceFn::argmax || fn == ops::ReduceFn::argmin;
          if (arg && dims.size() != 1) continue;
          const Tensor x = strided ? random_tensor({7, 1, 3}, dt, 5).permute({2, 1, 0}).as_strided({3, 4, 7}, {1, 0, 3}, 0)
                                   : random_tensor({3, 4, 7}, dt, 5);
          Shape ks = x.sizes();
          for (int d : dims) ks[d] = 1;
          const DType ydt = arg ? DType::i64 : dt;
          const Tensor y = Tensor::empty(ks, ydt), y_ref = Tensor::empty(ks, ydt);
          be().reduce_dims({x, y, fn});
          ref_.reduce_dims({x, y_ref, fn});
          const std::string w = what("reduce_dims", dt, (strided ? "strided " : "") + ks.str() + " fn " +
                                                            std::to_string(static_cast<int>(fn)));
          if (arg)
            EXPECT_EQ(y.to_vector<int64_t>(), y_ref.to_vector<int64_t>()) << w;
          else
            STRATA_EXPECT_CLOSE(y, y_ref, kTolReduction, w);
        }
}

TEST_P(CpuTensorOps, SoftmaxForwardAndBackwardMatchTheReference) {
  for (DType dt : {DType::f32, DType::f64})
    for (bool log : {false, true})
      for (int dim : {0, 1, 2}) {
        const Tensor x = random_tensor({4, 1, 9}, dt, 6, -4.0, 4.0).permute({2, 1, 0});  // [9, 1, 4], strided
        const Tensor dy = random_tensor({9, 1, 4}, dt, 7);
        const Tensor y = nan_tensor({9, 1, 4}, kNCHW, dt), y_ref = nan_tensor({9, 1, 4}, kNCHW, dt);
        const Tensor dx = nan_tensor({9, 1, 4}, kNCHW, dt), dx_ref = nan_tensor({9, 1, 4}, kNCHW, dt);
        be().softmax_fwd({x, y, dim, log});
        ref_.softmax_fwd({x, y_ref, dim, log});
        be().softmax_bwd({y_ref, dy, dx, dim, log});
        ref_.softmax_bwd({y_ref, dy, dx_ref, dim, log});
        const std::string w = what("softmax", dt, std::string(log ? "log " : "") + "dim " + std::to_string(dim));
        STRATA_EXPECT_CLOSE(y, y_ref, kTolReduction, w + " y");
        STRATA_EXPECT_CLOSE(dx, dx_ref, kTolReduction, w + " dx");
      }
}

TEST_P(CpuTensorOps, BatchedProductsMatchTheReference) {
  struct Case {
    int64_t b, m, k, n;
    bool ta, tb, broadcast_b;
  };
  const Case cases[] = {{3, 5, 7, 4, false, false, false}, {2, 1, 9, 6, true, false, false},
                        {4, 6, 3, 1, false, true, true},   {1, 8, 8, 8, true, true, false},
                        {2, 5, 1, 3, false, false, true}};
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases) {
      const Tensor a = c.ta ? random_tensor({c.b, c.k, c.m}, dt, 8).permute({0, 2, 1}) : random_tensor({c.b, c.m, c.k}, dt, 8);
      Tensor b = c.tb ? random_tensor({c.b, c.n, c.k}, dt, 9).permute({0, 2, 1}) : random_tensor({c.b, c.k, c.n}, dt, 9);
      if (c.broadcast_b) b = b.narrow(0, 0, 1).as_strided({c.b, c.k, c.n}, {0, b.strides()[1], b.strides()[2]}, b.offset());
      const Tensor y = nan_tensor({c.b, c.m, c.n}, kNCHW, dt), y_ref = nan_tensor({c.b, c.m, c.n}, kNCHW, dt);
      be().bmm({a, b, y, 0.5});
      ref_.bmm({a, b, y_ref, 0.5});
      STRATA_EXPECT_CLOSE(y, y_ref, kTolGemm, what("bmm", dt, a.sizes().str() + (c.ta ? "T" : "") + " x " +
                                                                   b.sizes().str() + (c.tb ? "T" : "")));
    }
}

TEST_P(CpuTensorOps, IndexSelectAndIndexAddMatchTheReference) {
  const Tensor index = Tensor::from_vector<int64_t>({4, 0, 4, 2, 1, 4}, {6});
  for (DType dt : {DType::f32, DType::f64})
    for (int dim : {0, 1}) {
      const Tensor x = dim == 0 ? transposed({5, 3}, dt, 10) : random_tensor({3, 5}, dt, 10);
      Shape ys = x.sizes();
      ys[dim] = 6;
      const Tensor y = nan_tensor(ys, kNCHW, dt), y_ref = nan_tensor(ys, kNCHW, dt);
      be().index_select({x, index, y, dim});
      ref_.index_select({x, index, y_ref, dim});
      STRATA_EXPECT_CLOSE(y, y_ref, 0.0, what("index_select", dt, "dim " + std::to_string(dim)));
      const Tensor src = random_tensor(ys, dt, 11);
      const Tensor acc = zeros(x.sizes(), dt), acc_ref = zeros(x.sizes(), dt);
      be().index_add({src, index, acc, dim});
      ref_.index_add({src, index, acc_ref, dim});
      STRATA_EXPECT_CLOSE(acc, acc_ref, kTolElementwise, what("index_add", dt, "dim " + std::to_string(dim)));
    }
}

STRATA_CPU_BACKEND_SUITE(CpuTensorOps);

}  // namespace
}  // namespace strata::testing
