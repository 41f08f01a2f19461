// The tensor API's ops on the cuda backend against the reference (backends/cpu/tensor_ops.h's
// loops, in double): compare, where, reduce_dims, softmax_fwd/bwd, bmm, index_select and
// index_add, on odd sizes, size-1 dims, transposed and stride-0 (broadcast) operands, in every
// dtype the cuda table claims (f16 and bf16 against the reference in f32 on the same rounded
// inputs); bad indices are a strata::Error naming the op, the position and the value.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

STRATA_COVERS(compare, "cuda_vs_reference");
STRATA_COVERS(where, "cuda_vs_reference");
STRATA_COVERS(reduce_dims, "cuda_vs_reference");
STRATA_COVERS(softmax_fwd, "cuda_vs_reference");
STRATA_COVERS(softmax_bwd, "cuda_vs_reference");
STRATA_COVERS(bmm, "cuda_vs_reference");
STRATA_COVERS(index_select, "cuda_vs_reference");
STRATA_COVERS(index_add, "cuda_vs_reference");

class CudaTensorOps : public CudaTest {};

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8};



// Whole numbers in [lo, hi] in any dtype (equal values and ties are common).
Tensor small_ints(const Shape& sizes, DType dt, uint64_t seed, int lo = -3, int hi = 3) {
  if (dt == DType::u8) lo = std::max(lo, 0);  // no negative values in u8
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(sizes.numel()));
  for (double& x : v) x = d(rng);
  return host_as(Tensor::from_vector(v, sizes), dt);
}
Tensor random_of(const Shape& sizes, DType dt, uint64_t seed) {
  if (dt == DType::f32 || dt == DType::f64 || is_half(dt)) return random_tensor(sizes, dt, seed);
  return small_ints(sizes, dt, seed, dt == DType::u8 ? 0 : -50, 50);
}

// The same view (fn applied to a dense base) on the CPU and on the GPU.
struct Both {
  Tensor cpu, gpu;
};
template <class F>
Both both(const Tensor& base, F&& view) {
  return {view(base), view(to_gpu(base))};
}
Both dense(const Tensor& base) {
  return both(base, [](const Tensor& t) { return t; });
}
// sizes as the transpose of a dense tensor of the reversed sizes (no dim has unit stride
// but the first).
Both reversed(const Shape& sizes, DType dt, uint64_t seed, bool ints = false) {
  const int nd = sizes.size();
  Shape rs;
  std::vector<int> perm;
  for (int d = nd - 1; d >= 0; --d) rs.push_back(sizes[d]);
  for (int d = 0; d < nd; ++d) perm.push_back(nd - 1 - d);
  const Tensor base = ints ? small_ints(rs, dt, seed) : random_of(rs, dt, seed);
  return both(base, [&](const Tensor& t) { return t.permute(perm); });
}
// sizes with dim `dim` broadcast (stride 0) from a tensor of extent 1 there.
Both broadcast(const Shape& sizes, int dim, DType dt, uint64_t seed, bool ints = false) {
  Shape one = sizes;
  one[dim] = 1;
  const Tensor base = ints ? small_ints(one, dt, seed) : random_of(one, dt, seed);
  return both(base, [&](const Tensor& t) {
    Shape st = t.strides();
    st[dim] = 0;
    return t.as_strided(sizes, st, t.offset());
  });
}


// ---- compare ------------------------------------------------------------------------------

TEST_F(CudaTensorOps, CompareMatchesTheReference) {
  const Shape s{5, 1, 7, 3};
  for (DType dt : kAll)
    for (int variant = 0; variant < 3; ++variant) {
      // a dense, b dense / transposed / broadcast along dim 2; small whole numbers: many ties.
      const Both a = dense(small_ints(s, dt, 11));
      const Both b = variant == 0   ? dense(small_ints(s, dt, 12))
                     : variant == 1 ? reversed(s, dt, 13, true)
                                    : broadcast(s, 2, dt, 14, true);
      for (ops::CompareFn fn : {ops::CompareFn::eq, ops::CompareFn::ne, ops::CompareFn::lt, ops::CompareFn::le,
                                ops::CompareFn::gt, ops::CompareFn::ge}) {
        const Tensor yg = Tensor::empty(s, DType::u8, Device::cuda());
        be().fill({yg, 7});
        const Tensor yr = Tensor::empty(s, DType::u8);
        be().compare({a.gpu, b.gpu, yg, fn});
        ref_.compare({host_as(a.cpu, ref_dtype(dt)), host_as(b.cpu, ref_dtype(dt)), yr, fn});
        EXPECT_TRUE(bitwise_equal(to_cpu(yg), yr))
            << ops::compare_name(fn) << " " << dtype_name(dt) << " variant " << variant;
      }
    }
}

TEST_F(CudaTensorOps, CompareOfNaNIsFalseButNe) {
  const Tensor a = Tensor::from_vector(std::vector<float>{NAN, 1.f, NAN}, {3});
  const Tensor b = Tensor::from_vector(std::vector<float>{NAN, NAN, 2.f}, {3});
  for (ops::CompareFn fn : {ops::CompareFn::eq, ops::CompareFn::ne, ops::CompareFn::lt, ops::CompareFn::ge}) {
    const Tensor yg = Tensor::empty({3}, DType::u8, Device::cuda()), yr = Tensor::empty({3}, DType::u8);
    be().compare({to_gpu(a), to_gpu(b), yg, fn});
    ref_.compare({a, b, yr, fn});
    EXPECT_TRUE(bitwise_equal(to_cpu(yg), yr)) << ops::compare_name(fn);
  }
}

// ---- where --------------------------------------------------------------------------------

TEST_F(CudaTensorOps, WhereMatchesTheReference) {
  const Shape s{6, 4, 1, 9};
  for (DType dt : kFloats) {
    const Both cond = broadcast(s, 0, DType::u8, 21, true);  // cond broadcast along dim 0
    // Nonzero values other than 1 count as true too.
    const Both cond_dense = dense(small_ints(s, DType::u8, 22, 0, 2));
    const Both a = reversed(s, dt, 23), b = broadcast(s, 1, dt, 24);
    for (const Both* c : {&cond, &cond_dense}) {
      const Tensor yg = gpu_nan(s, kNCHW, dt), yr = cpu_nan(s, kNCHW, ref_dtype(dt));
      be().where({c->gpu, a.gpu, b.gpu, yg});
      ref_.where({c->cpu, host_as(a.cpu, ref_dtype(dt)), host_as(b.cpu, ref_dtype(dt)), yr});
      EXPECT_TRUE(same_values(to_cpu(yg), yr)) << dtype_name(dt);
    }
  }
}

// ---- reduce_dims -----------------------------------------------------------------------------

constexpr ops::ReduceFn kReduceFns[] = {ops::ReduceFn::sum, ops::ReduceFn::mean,   ops::ReduceFn::max,
                                        ops::ReduceFn::min, ops::ReduceFn::argmax, ops::ReduceFn::argmin};
const char* reduce_name(ops::ReduceFn fn) {
  static const char* const kNames[] = {"sum", "mean", "max", "min", "argmax", "argmin"};
  return kNames[static_cast<int>(fn)];
}
bool is_arg(ops::ReduceFn fn) { return fn == ops::ReduceFn::argmax || fn == ops::ReduceFn::argmin; }

// x reduced over `dims` on both backends; values compared by tolerance (sum, mean) or
// exactly (max, min: one of the values; argmax, argmin: positions).
void check_reduce(CudaBackend& be, ReferenceBackend& ref, const Both& x, DType dt, const std::vector<int>& dims,
                  ops::ReduceFn fn, const std::string& what) {
  Shape ys = x.cpu.sizes();
  for (int d : dims) ys[d] = 1;
  const DType out = is_arg(fn) ? DType::i64 : dt;
  const DType ref_out = is_arg(fn) ? DType::i64 : ref_dtype(dt);
  const Tensor yg = Tensor::empty(ys, out, Device::cuda()), yr = Tensor::empty(ys, ref_out);
  be.fill({yg, is_arg(fn) ? -5.0 : NAN});
  be.reduce_dims({x.gpu, yg, fn});
  ref.reduce_dims({host_as(x.cpu, ref_dtype(dt)), yr, fn});
  const std::string w = what + " " + reduce_name(fn) + " " + std::string(dtype_name(dt));
  if (fn == ops::ReduceFn::sum || fn == ops::ReduceFn::mean) {
    STRATA_EXPECT_CLOSE(host_as(yg, ref_out), yr, tol(dt, kTolReduction), w);
  } else {
    EXPECT_TRUE(same_values(to_cpu(yg), yr)) << w;
  }
}

TEST_F(CudaTensorOps, ReduceDimsMatchesTheReference) {
  const Shape s{5, 1, 7, 33};
  const std::vector<std::vector<int>> dim_sets = {{0}, {1}, {2}, {3}, {1, 3}, {0, 2}, {0, 2, 3}, {0, 1, 2, 3}};
  for (DType dt : kFloats)
    for (int variant = 0; variant < 3; ++variant) {
      // dense random; transposed random; dense whole numbers (ties: the first position wins).
      const Both x = variant == 0 ? dense(random_tensor(s, dt, 31))
                     : variant == 1 ? reversed(s, dt, 32)
                                    : dense(small_ints(s, dt, 33));
      for (const auto& dims : dim_sets)
        for (ops::ReduceFn fn : kReduceFns) {
          std::string what = "variant ";
          what += std::to_string(variant);
          what += " dims";
          for (int d : dims) {
            what += ' ';
            what += std::to_string(d);
          }
          check_reduce(be(), ref_, x, dt, dims, fn, what);
        }
    }
}

// Long and short extents, contiguous and strided: the block, warp and thread-per-output paths.
TEST_F(CudaTensorOps, ReduceDimsOverLongAndStridedExtents) {
  struct Case {
    Shape sizes;
    std::vector<int> dims;
  };
  const Case cases[] = {{{3, 5000}, {1}},   {{4100, 3}, {0}},  {{3000, 40}, {1}}, {{40, 3000}, {0}},
                        {{1, 70001}, {1}}, {{9, 130}, {0, 1}}, {{2, 3, 1}, {}}};
  for (DType dt : {DType::f32, DType::f64, DType::bf16})
    for (const Case& c : cases)
      for (ops::ReduceFn fn : kReduceFns)
        check_reduce(be(), ref_, dense(random_tensor(c.sizes, dt, 41)), dt, c.dims, fn, c.sizes.str());
}

// NaN propagates through max and min; argmax and argmin take the first NaN.
TEST_F(CudaTensorOps, ReduceDimsNaNRules) {
  for (DType dt : {DType::f32, DType::f64, DType::f16}) {
    for (const Shape& s : {Shape{6, 45}, Shape{6, 3000}}) {
      Tensor x = small_ints(s, DType::f64, 51);
      double* p = x.data<double>();
      const int64_t n = s[1];
      p[0 * n + 3] = NAN;       // row 0: one NaN
      p[1 * n + 2] = NAN;       // row 1: two NaNs, the first at 2
      p[1 * n + n - 1] = NAN;
      p[2 * n + n - 1] = NAN;   // row 2: the last element
      const Both xb = dense(host_as(x, dt));
      for (ops::ReduceFn fn : kReduceFns)
        if (fn != ops::ReduceFn::sum && fn != ops::ReduceFn::mean)
          check_reduce(be(), ref_, xb, dt, {1}, fn, "NaN " + s.str());
    }
  }
}

// ---- softmax ----------------------------------------------------------------------------------

void check_softmax(CudaBackend& be, ReferenceBackend& ref, const Both& x, DType dt, int dim, bool log,
                   const std::string& what) {
  const Shape& s = x.cpu.sizes();
  const DType rd = ref_dtype(dt);
  // Forward, into a transposed output.
  const Both y = reversed(s, dt, 99);
  be.fill({y.gpu, NAN});
  const Tensor yr = cpu_nan(s, kNCHW, rd);
  be.softmax_fwd({x.gpu, y.gpu, dim, log});
  ref.softmax_fwd({host_as(x.cpu, rd), yr, dim, log});
  const std::string w = what + " dim " + std::to_string(dim) + (log ? " log " : " ") + std::string(dtype_name(dt));
  STRATA_EXPECT_CLOSE(host_as(y.gpu, rd), yr, tol(dt, kTolReduction), w + " fwd");
  // Backward from the GPU's own y, dy broadcast (stride 0) along a dim other than the softmax's:
  // a dy constant along the softmax dim has the gradient 0, which only rounding would tell apart.
  const Both dy = broadcast(s, dim == 0 ? s.size() - 1 : 0, dt, 98);
  const Tensor yin = host_as(y.gpu, dt);
  const Both yb = dense(yin);
  const Tensor dxg = gpu_nan(s, kNCHW, dt), dxr = cpu_nan(s, kNCHW, rd);
  be.softmax_bwd({yb.gpu, dy.gpu, dxg, dim, log});
  ref.softmax_bwd({host_as(yin, rd), host_as(dy.cpu, rd), dxr, dim, log});
  STRATA_EXPECT_CLOSE(host_as(dxg, rd), dxr, tol(dt, kTolReduction), w + " bwd");
}

TEST_F(CudaTensorOps, SoftmaxMatchesTheReference) {
  const Shape s{4, 37, 1, 5};
  for (DType dt : kFloats)
    for (bool transposed : {false, true}) {
      const Both x = transposed ? reversed(s, dt, 61) : dense(random_tensor(s, dt, 62, -4.0, 4.0));
      for (int dim = 0; dim < 4; ++dim)
        for (bool log : {false, true}) check_softmax(be(), ref_, x, dt, dim, log, transposed ? "transposed" : "dense");
    }
}

TEST_F(CudaTensorOps, SoftmaxOverLongAndStridedRows) {
  const std::pair<Shape, int> cases[] = {{{3, 5000}, 1}, {{2500, 3}, 0}, {{20, 40}, 0}, {{3000, 7}, 0}, {{1, 1}, 1}};
  for (DType dt : {DType::f32, DType::f16})
    for (const auto& [s, dim] : cases)
      for (bool log : {false, true})
        check_softmax(be(), ref_, dense(random_tensor(s, dt, 63, -8.0, 8.0)), dt, dim, log, s.str());
}

TEST_F(CudaTensorOps, SoftmaxOfInfiniteRows) {
  // A row of -inf and a row with +inf: the CPU loop's rules (no NaN from -inf - -inf).
  const Tensor x = Tensor::from_vector(std::vector<float>{-INFINITY, -INFINITY, -INFINITY, 1.f, INFINITY, 2.f}, {2, 3});
  for (bool log : {false, true}) {
    const Tensor yg = gpu_nan({2, 3}), yr = cpu_nan({2, 3});
    be().softmax_fwd({to_gpu(x), yg, 1, log});
    ref_.softmax_fwd({x, yr, 1, log});
    EXPECT_TRUE(same_values(to_cpu(yg), yr)) << (log ? "log" : "softmax");
  }
}

// ---- bmm ----------------------------------------------------------------------------------------

// [B, rows, cols] random: dense, transposed (column-major matrices) or one matrix for every
// batch (batch stride 0).
Both matrices(int64_t batch, int64_t rows, int64_t cols, bool trans, bool batch0, DType dt, uint64_t seed) {
  const int64_t stored = batch0 ? 1 : batch;
  const Tensor base = trans ? random_tensor({stored, cols, rows}, dt, seed) : random_tensor({stored, rows, cols}, dt, seed);
  return both(base, [&](const Tensor& t) {
    Tensor v = trans ? t.permute({0, 2, 1}) : t;
    if (batch0) {
      Shape st = v.strides();
      st[0] = 0;
      v = v.as_strided({batch, rows, cols}, st, v.offset());
    }
    return v;
  });
}

TEST_F(CudaTensorOps, BmmMatchesTheReference) {
  struct Case {
    int64_t b, m, k, n;
    bool ta, tb, a0, b0;
    double alpha;
  };
  const Case cases[] = {{3, 17, 9, 13, false, false, false, false, 1.0}, {1, 1, 5, 7, true, false, false, false, 1.0},
                        {4, 8, 1, 6, false, true, false, false, -0.5},  {2, 33, 65, 31, true, true, false, true, 1.5},
                        {5, 12, 20, 1, false, false, true, false, 2.0}, {3, 1, 1, 1, true, true, true, true, 1.0},
                        {2, 64, 128, 96, true, false, false, true, 0.25}};
  for (DType dt : kFloats)
    for (const Case& c : cases) {
      const Both a = matrices(c.b, c.m, c.k, c.ta, c.a0, dt, 71), b = matrices(c.b, c.k, c.n, c.tb, c.b0, dt, 72);
      const Shape ys{c.b, c.m, c.n};
      const Tensor yg = gpu_nan(ys, kNCHW, dt), yr = cpu_nan(ys, kNCHW, ref_dtype(dt));
      be().bmm({a.gpu, b.gpu, yg, c.alpha});
      ref_.bmm({host_as(a.cpu, ref_dtype(dt)), host_as(b.cpu, ref_dtype(dt)), yr, c.alpha});
      STRATA_EXPECT_CLOSE(host_as(yg, ref_dtype(dt)), yr, tol(dt, kTolGemm),
                          ys.str() + " k " + std::to_string(c.k) + " " + std::string(dtype_name(dt)) +
                              (c.ta ? " aT" : "") + (c.tb ? " bT" : "") + (c.a0 ? " a0" : "") + (c.b0 ? " b0" : ""));
    }
}

TEST_F(CudaTensorOps, BmmWithNoInnerDimensionIsZero) {
  const Tensor a = Tensor::empty({2, 3, 0}, DType::f32, Device::cuda()), b = Tensor::empty({2, 0, 4}, DType::f32, Device::cuda());
  const Tensor y = gpu_nan({2, 3, 4});
  be().bmm({a, b, y, 1.0});
  EXPECT_TRUE(same_values(to_cpu(y), host_as(Tensor::from_vector(std::vector<float>(24, 0.f), {2, 3, 4}), DType::f32)));
}

// ---- index_select, index_add -----------------------------------------------------------------------

Tensor index_of(const std::vector<int64_t>& v, DType dt) {
  return host_as(Tensor::from_vector(v, {static_cast<int64_t>(v.size())}), dt);
}

TEST_F(CudaTensorOps, IndexSelectMatchesTheReference) {
  const Shape s{7, 5, 3};
  for (DType dt : kAll)
    for (DType it : {DType::i64, DType::i32})
      for (bool transposed : {false, true})
        for (int dim = 0; dim < 3; ++dim) {
          const Both x = transposed ? reversed(s, dt, 81) : dense(random_of(s, dt, 82));
          const int64_t e = s[dim];
          const Tensor index = index_of({2 % e, 0, 2 % e, e - 1, 1 % e, 2 % e}, it);  // repeats
          Shape ys = s;
          ys[dim] = index.numel();
          const Tensor yg = Tensor::empty(ys, dt, Device::cuda()), yr = Tensor::empty(ys, dt);
          be().index_select({x.gpu, to_gpu(index), yg, dim});
          ref_.index_select({x.cpu, index, yr, dim});
          EXPECT_TRUE(bitwise_equal(to_cpu(yg), yr))
              << dtype_name(dt) << " index " << dtype_name(it) << " dim " << dim << (transposed ? " transposed" : "");
        }
}

TEST_F(CudaTensorOps, IndexAddMatchesTheReferenceAndIsDeterministic) {
  const Shape ys{6, 4, 5};
  for (DType dt : kFloats)
    for (DType it : {DType::i64, DType::i32})
      for (int dim = 0; dim < 3; ++dim) {
        const int64_t e = ys[dim];
        const Tensor index = index_of({1, e - 1, 1, 0, e - 1, 1, 2 % e}, it);  // repeats
        Shape xs = ys;
        xs[dim] = index.numel();
        const Both x = reversed(xs, dt, 91);  // a transposed source
        const Tensor y0 = random_tensor(ys, dt, 92);
        const DType rd = ref_dtype(dt);
        Tensor yg = to_gpu(y0), yr = host_as(y0, rd);
        be().index_add({x.gpu, to_gpu(index), yg, dim});
        ref_.index_add({host_as(x.cpu, rd), index, yr, dim});
        const std::string w = std::string(dtype_name(dt)) + " index " + std::string(dtype_name(it)) + " dim " +
                              std::to_string(dim);
        STRATA_EXPECT_CLOSE(host_as(yg, rd), yr, tol(dt, kTolElementwise), w);
        const Tensor again = to_gpu(y0);
        be().index_add({x.gpu, to_gpu(index), again, dim});
        EXPECT_TRUE(bitwise_equal(to_cpu(again), to_cpu(yg))) << w << " (run twice)";
      }
}

TEST_F(CudaTensorOps, IndexAddIntoABroadcastSourceAndManyRows) {
  // x broadcast along the kept dim (stride 0); 3000 index entries into 17 rows.
  std::vector<int64_t> idx(3000);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 7) % 17);
  const Tensor index = index_of(idx, DType::i64);
  const Both x = broadcast({3000, 33}, 1, DType::f32, 93);
  const Tensor y0 = random_tensor({17, 33}, DType::f32, 94);
  Tensor yg = to_gpu(y0), yr = host_as(y0, DType::f32);
  be().index_add({x.gpu, to_gpu(index), yg, 0});
  ref_.index_add({x.cpu, index, yr, 0});
  STRATA_EXPECT_CLOSE(host_as(yg, DType::f32), yr, kTolElementwise, "3000 rows");
}

// Many rows into a matrix go grouped by destination (a sorted index); the same call on the
// same data viewed with a trailing dim of 1 goes through the row-serial kernel: the two must
// agree bit for bit (the same additions in the same order), and in f32 with the reference.
TEST_F(CudaTensorOps, IndexAddGroupedGivesTheSerialKernelsBits) {
  std::vector<int64_t> idx(5000);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 37 + i / 3) % 301);  // repeats, unordered
  for (DType dt : {DType::f32, DType::bf16})
    for (DType it : {DType::i64, DType::i32}) {
      const Tensor index = to_gpu(index_of(idx, it));
      const Tensor x = to_gpu(random_tensor({5000, 70}, dt, 99)), y0 = random_tensor({301, 70}, dt, 100);
      Tensor grouped = to_gpu(y0), serial = to_gpu(y0).view({301, 70, 1});
      be().index_add({x, index, grouped, 0});
      be().index_add({x.view({5000, 70, 1}), index, serial, 0});
      const std::string w = std::string(dtype_name(dt)) + " index " + std::string(dtype_name(it));
      EXPECT_TRUE(bitwise_equal(to_cpu(grouped), to_cpu(serial).view({301, 70}))) << w;
      if (dt != DType::f32) continue;  // bf16 rounds after every addition, 17 per row: the bits above say enough
      Tensor yr = y0.clone();
      ref_.index_add({to_cpu(x), index_of(idx, it), yr, 0});
      STRATA_EXPECT_CLOSE(to_cpu(grouped), yr, kTolReduction, w + " against the reference");
    }
  // An out-of-range entry among many: named (the first one by position), the good rows still added.
  std::vector<int64_t> with_bad(idx.begin(), idx.begin() + 100);
  with_bad[40] = 301;
  with_bad[70] = -2;
  const Tensor x = to_gpu(random_tensor({100, 70}, DType::f32, 101));
  Tensor y = to_gpu(random_tensor({301, 70}, DType::f32, 102));
  be().index_add({x, to_gpu(index_of(with_bad, DType::i64)), y, 0});
  EXPECT_STRATA_ERROR(be().synchronize(), "index_add", "index[40] = 301", "out of range");
}

// Raised at the host's next look (index_errors.h): here a synchronisation, or the next index op
// once the device has run the bad one.
TEST_F(CudaTensorOps, AnOutOfRangeIndexIsAnError) {
  const Tensor x = to_gpu(random_tensor({5, 4}, DType::f32, 95));
  const Tensor bad64 = to_gpu(index_of({1, 9, 0, 7}, DType::i64));
  const Tensor bad32 = to_gpu(index_of({0, -1, 2}, DType::i32));
  const Tensor ys = Tensor::empty({4, 4}, DType::f32, Device::cuda());
  be().index_select({x, bad64, ys, 0});
  EXPECT_STRATA_ERROR(be().synchronize(), "index_select", "index", "index[1] = 9", "out of range");
  EXPECT_NO_THROW(be().synchronize()) << "raised a second time";
  be().index_select({x, bad64, ys, 0});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_STRATA_ERROR(be().index_select({x, bad64, ys, 0}), "index_select", "index[1] = 9");
  be().synchronize();  // the call that raised ran nothing; its repeat above found nothing new
  const Tensor ys32 = Tensor::empty({5, 3}, DType::f32, Device::cuda());
  be().index_select({x, bad32, ys32, 1});
  EXPECT_STRATA_ERROR(be().synchronize(), "index_select", "index[1] = -1");
  // index_add: x [4, 4] into y [5, 4] along dim 0; the good rows are still added.
  const Tensor xa = to_gpu(random_tensor({4, 4}, DType::f32, 96));
  const Tensor y = to_gpu(random_tensor({5, 4}, DType::f32, 97));
  be().index_add({xa, bad64, y, 0});
  EXPECT_STRATA_ERROR(be().synchronize(), "index_add", "index", "index[1] = 9");
  const Tensor xb = to_gpu(random_tensor({5, 3}, DType::f32, 98));
  be().index_add({xb, bad32, y, 1});
  EXPECT_STRATA_ERROR(be().synchronize(), "index_add", "index[1] = -1");
  // The backend still runs after the errors.
  const Tensor good = to_gpu(index_of({4, 0}, DType::i64));
  const Tensor y2 = Tensor::empty({2, 4}, DType::f32, Device::cuda());
  be().index_select({x, good, y2, 0});
  be().synchronize();
}

}  // namespace
}  // namespace strata::testing
