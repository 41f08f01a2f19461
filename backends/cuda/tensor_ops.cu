// The tensor API's ops on the GPU (backends/cpu/tensor_ops.h holds their definitions, the
// loops these kernels match): comparisons (pointwise.def's STRATA_COMPARE rows, u8 out, every
// dtype), where, reductions over any set of dims (sum, mean, max, min, argmax, argmin),
// softmax and log_softmax with their backward, index_select (any dtype, moved as bytes) and
// index_add (deterministic: each destination's rows are added in index order, no atomics).
// Every operand takes any strides (0 for a broadcast input). f16/bf16 compute in float, f64 in
// double. bmm lives in linear.cu (cuBLAS).
#include <cub/device/device_radix_sort.cuh>
#include <limits>

#include "strata/backends/cuda/index_errors.h"
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

template <class A>
__device__ __forceinline__ bool is_nan(A v) {
  return v != v;  // NOLINT
}

// ---- compare, where ----------------------------------------------------------------
template <CompareFn Fn, class T>
struct CompareK {
  const T* a;
  const T* b;
  uint8_t* y;
  // Half types load as float (exact); the others compare in their own type, as on the CPU.
  __device__ void operator()(int64_t, const int64_t* o) const {
    y[o[2]] = CompareFunctor<Fn>::fwd(load(a[o[0]]), load(b[o[1]])) ? 1 : 0;
  }
};

template <class T>
struct WhereK {
  const uint8_t* c;
  const T* a;
  const T* b;
  T* y;
  __device__ void operator()(int64_t, const int64_t* o) const { y[o[3]] = c[o[0]] ? a[o[1]] : b[o[2]]; }
};

// ---- group reductions ------------------------------------------------------------------
// A group of G threads (1, 32: a warp, or kThreads: the block) works on one output. Each
// thread folds its elements in increasing order with Op::step; group_allreduce combines the
// threads' states so that every thread of the group holds the same result (a butterfly:
// the combines are commutative, so the partners compute the same bits), in a fixed order.
template <class A>
struct SumOp {
  struct S {
    A v;
  };
  __device__ static S init() { return {A(0)}; }
  __device__ static void step(S& s, A v, int64_t) { s.v += v; }
  __device__ static S combine(S a, S b) { return {a.v + b.v}; }
  __device__ static S shfl_xor(S s, int m) { return {__shfl_xor_sync(0xffffffffu, s.v, m)}; }
};
// The largest value, NaN ignored (softmax's row maximum: std::max on the CPU skips NaN too).
template <class A>
struct MaxIgnoringNanOp {
  struct S {
    A v;
  };
  __device__ static S init() { return {A(-INFINITY)}; }
  __device__ static void step(S& s, A v, int64_t) { s.v = fmax(s.v, v); }
  __device__ static S combine(S a, S b) { return {fmax(a.v, b.v)}; }
  __device__ static S shfl_xor(S s, int m) { return {__shfl_xor_sync(0xffffffffu, s.v, m)}; }
};
// The extreme value and its position (max/argmax: Max true; min/argmin). NaN wins over any
// number (max and min propagate it); between NaNs, or equal values, the first position wins.
// i < 0: no element seen yet.
template <class A, bool Max>
struct ExtremeOp {
  struct S {
    A v;
    int64_t i;
  };
  // Whether (v, k) is preferred to (w, j).
  __device__ static bool better(A v, int64_t k, A w, int64_t j) {
    const bool vn = is_nan(v), wn = is_nan(w);
    if (vn || wn) return vn && (!wn || k < j);
    if (v == w) return k < j;
    return Max ? v > w : v < w;
  }
  __device__ static S init() { return {A(0), -1}; }
  __device__ static void step(S& s, A v, int64_t k) {
    if (s.i < 0 || better(v, k, s.v, s.i)) s = {v, k};
  }
  __device__ static S combine(S a, S b) {
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    return better(b.v, b.i, a.v, a.i) ? b : a;
  }
  __device__ static S shfl_xor(S s, int m) {
    return {__shfl_xor_sync(0xffffffffu, s.v, m), static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, s.i, m))};
  }
};

template <int G, class Op>
__device__ __forceinline__ typename Op::S group_allreduce(typename Op::S s) {
  if constexpr (G > 1) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s = Op::combine(s, Op::shfl_xor(s, o));
    if constexpr (G > 32) {  // G == blockDim.x: the warps' results through shared memory
      __shared__ typename Op::S warp_states[G / 32];
      __syncthreads();  // a previous call's readers are done
      if ((threadIdx.x & 31) == 0) warp_states[threadIdx.x >> 5] = s;
      __syncthreads();
      s = warp_states[0];
#pragma unroll
      for (int w = 1; w < G / 32; ++w) s = Op::combine(s, warp_states[w]);
    }
  }
  return s;
}

// Group size for `rows` independent reductions of `n` elements each, the elements of one
// `stride` apart: a block for long rows, a thread per row where rows are short or where
// neighbouring rows (not neighbouring elements) are adjacent in memory, else a warp.
int group_for(const Context& ctx, int64_t rows, int64_t n, bool unit_stride) {
  if (n >= 4096 || (n >= 512 && rows < int64_t{ctx.sm_count} * 4)) return kThreads;
  if (n <= 16 || (!unit_stride && rows >= 2048)) return 1;
  return 32;
}

// Calls f(std::integral_constant<int, G>) for G in {1, 32, kThreads}.
template <class F>
void with_group(int g, F&& f) {
  if (g == 1) {
    f(std::integral_constant<int, 1>{});
  } else if (g == 32) {
    f(std::integral_constant<int, 32>{});
  } else {
    f(std::integral_constant<int, kThreads>{});
  }
}

// ---- reduce_dims -------------------------------------------------------------------------
template <class A, ReduceFn Fn>
struct OpFor {
  using type = SumOp<A>;
};
template <class A>
struct OpFor<A, ReduceFn::max> {
  using type = ExtremeOp<A, true>;
};
template <class A>
struct OpFor<A, ReduceFn::argmax> {
  using type = ExtremeOp<A, true>;
};
template <class A>
struct OpFor<A, ReduceFn::min> {
  using type = ExtremeOp<A, false>;
};
template <class A>
struct OpFor<A, ReduceFn::argmin> {
  using type = ExtremeOp<A, false>;
};

// outer: y's elements (offsets in x, kept dims only, and in y); inner: the reduced dims
// in row-major order (x's offsets; k is argmax's position).
template <int G, class T, ReduceFn Fn>
__global__ void __launch_bounds__(kThreads)
    reduce_dims_kernel(const T* x, void* y, Strided<2> outer, Strided<1> inner, int64_t count) {
  using A = acc_t<T>;
  using Op = typename OpFor<A, Fn>::type;
  constexpr int kPerBlock = kThreads / G;
  const int lane = threadIdx.x % G;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kPerBlock + threadIdx.x / G; r < outer.n; r += step) {
    int64_t off[2];
    outer.offsets(r, off);
    const T* base = x + off[0];
    typename Op::S s = Op::init();
    for (int64_t k = lane; k < count; k += G) {
      int64_t o;
      inner.offsets(k, &o);
      Op::step(s, static_cast<A>(load(base[o])), k);
    }
    s = group_allreduce<G, Op>(s);
    if (lane != 0) continue;
    if constexpr (Fn == ReduceFn::argmax || Fn == ReduceFn::argmin) {
      static_cast<int64_t*>(y)[off[1]] = s.i < 0 ? 0 : s.i;
    } else if constexpr (Fn == ReduceFn::max || Fn == ReduceFn::min) {
      static_cast<T*>(y)[off[1]] = store<T>(s.i >= 0 ? s.v : Fn == ReduceFn::max ? A(-INFINITY) : A(INFINITY));
    } else if constexpr (Fn == ReduceFn::mean) {
      static_cast<T*>(y)[off[1]] = store<T>(count > 0 ? s.v / static_cast<A>(count) : A(NAN));
    } else {
      static_cast<T*>(y)[off[1]] = store<T>(s.v);
    }
  }
}

// ---- softmax ----------------------------------------------------------------------------
// rows: one element per row (the row's first element's offset in each operand); n elements
// along the softmax dim, each operand's stride along it.
template <int G, class T>
__global__ void __launch_bounds__(kThreads)
    softmax_fwd_kernel(const T* x, T* y, Strided<2> rows, int64_t n, int64_t sx, int64_t sy, bool log) {
  using A = acc_t<T>;
  constexpr int kPerBlock = kThreads / G;
  const int lane = threadIdx.x % G;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kPerBlock + threadIdx.x / G; r < rows.n; r += step) {
    int64_t off[2];
    rows.offsets(r, off);
    const T* xr = x + off[0];
    T* yr = y + off[1];
    typename MaxIgnoringNanOp<A>::S mx = MaxIgnoringNanOp<A>::init();
    for (int64_t i = lane; i < n; i += G) MaxIgnoringNanOp<A>::step(mx, static_cast<A>(load(xr[i * sx])), i);
    A m = group_allreduce<G, MaxIgnoringNanOp<A>>(mx).v;
    if (!isfinite(m)) m = A(0);  // a row of -inf stays NaN-free where it can (as the CPU loop)
    typename SumOp<A>::S s{A(0)};
    for (int64_t i = lane; i < n; i += G) s.v += ops::m::exp(static_cast<A>(load(xr[i * sx])) - m);
    const A sum = group_allreduce<G, SumOp<A>>(s).v;
    const A log_sum = ops::m::log(sum);
    for (int64_t i = lane; i < n; i += G) {
      const A v = static_cast<A>(load(xr[i * sx])) - m;
      yr[i * sy] = store<T>(log ? v - log_sum : ops::m::exp(v) / sum);
    }
  }
}

// dx = y (dy - sum(dy y)); log: dx = dy - exp(y) sum(dy).
template <int G, class T>
__global__ void __launch_bounds__(kThreads) softmax_bwd_kernel(const T* y, const T* dy, T* dx, Strided<3> rows, int64_t n,
                                                               int64_t sy, int64_t sdy, int64_t sdx, bool log) {
  using A = acc_t<T>;
  constexpr int kPerBlock = kThreads / G;
  const int lane = threadIdx.x % G;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kPerBlock + threadIdx.x / G; r < rows.n; r += step) {
    int64_t off[3];
    rows.offsets(r, off);
    const T* yr = y + off[0];
    const T* dyr = dy + off[1];
    T* dxr = dx + off[2];
    typename SumOp<A>::S s{A(0)};
    for (int64_t i = lane; i < n; i += G) {
      const A g = static_cast<A>(load(dyr[i * sdy]));
      s.v += log ? g : g * static_cast<A>(load(yr[i * sy]));
    }
    const A sum = group_allreduce<G, SumOp<A>>(s).v;
    for (int64_t i = lane; i < n; i += G) {
      const A yv = static_cast<A>(load(yr[i * sy])), g = static_cast<A>(load(dyr[i * sdy]));
      dxr[i * sdx] = store<T>(log ? g - ops::m::exp(yv) * sum : yv * (g - sum));
    }
  }
}

// v with the sizes `sizes` (and strides `strides`).
TensorView reshaped(const TensorView& v, const Shape& sizes, const Shape& strides) {
  TensorView r = v;
  r.sizes = sizes;
  r.strides = strides;
  return r;
}

// ---- index_select, index_add ------------------------------------------------------------
// codegen:begin cuda_kernels index_select
// The index's i-th entry; out of [0, extent): the smallest such i is recorded in *bad.
template <class I>
__device__ __forceinline__ int64_t index_entry(const I* index, int64_t stride, int64_t i, int64_t extent,
                                               unsigned long long* bad) {
  const int64_t r = static_cast<int64_t>(index[i * stride]);
  if (r < 0 || r >= extent) {
    atomicMin(bad, static_cast<unsigned long long>(i));
    return -1;
  }
  return r;
}

// o[0]: x's offset with the indexed dim at 0; o[1]: the position i along it; o[2]: y's offset.
template <class E, class I>
struct IndexSelectK {
  const E* x;
  E* y;
  const I* index;
  int64_t index_stride, x_stride, extent;
  unsigned long long* bad;
  __device__ void operator()(int64_t, const int64_t* o) const {
    const int64_t r = index_entry(index, index_stride, o[1], extent, bad);
    if (r >= 0) y[o[2]] = x[o[0] + r * x_stride];
  }
};
// codegen:end

// One thread per position of x's slice (every dim but the indexed one); it adds the n rows
// in index order, so the sums do not depend on timing.
template <class T, class I>
struct IndexAddK {
  const T* x;
  T* y;
  const I* index;
  int64_t index_stride, n, x_stride, y_stride, extent;
  unsigned long long* bad;
  __device__ void operator()(int64_t, const int64_t* o) const {
    using A = acc_t<T>;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = index_entry(index, index_stride, i, extent, bad);
      if (r < 0) continue;
      T* d = y + o[1] + r * y_stride;
      *d = store<T>(static_cast<A>(load(*d)) + static_cast<A>(load(x[o[0] + i * x_stride])));
    }
  }
};

// A 2-D index_add along dim 0 with many rows, grouped by destination: a stable sort of the
// index (CUB's radix sort keeps equal keys in position order) gives every destination its
// positions in index order, and a thread per (destination, column) adds them in that order:
// the same additions and roundings as IndexAddK's loop, so the same bits, without a chain of n
// dependent read-modify-writes per column (GPT-2's token-embedding backward, 16,384 rows into
// 50,257: 4.2 ms a call on an H200 that way).
constexpr int64_t kGroupedIndexAddRows = 64;  // fewer (a decoding step's cache rows): IndexAddK

template <class I>
__global__ void index_keys_kernel(const I* index, int64_t stride, int64_t n, I* keys, int64_t* pos) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  keys[i] = index[i * stride];
  pos[i] = i;
}

// Block x: a sorted position j (only a group's first does work); threads: columns.
template <class T, class I>
__global__ void index_add_grouped_kernel(const T* x, int64_t xs0, int64_t xs1, T* y, int64_t ys0, int64_t ys1,
                                         const I* keys, const int64_t* pos, int64_t n, int64_t cols, int64_t extent,
                                         unsigned long long* bad) {
  using A = acc_t<T>;
  const int64_t j = blockIdx.x;
  if (j > 0 && keys[j] == keys[j - 1]) return;
  const I r = keys[j];
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (r < 0 || r >= extent) {  // a bad group: record its positions, add nothing (IndexAddK skips them too)
    if (c == 0)
      for (int64_t k = j; k < n && keys[k] == r; ++k) atomicMin(bad, static_cast<unsigned long long>(pos[k]));
    return;
  }
  if (c >= cols) return;
  T* d = y + static_cast<int64_t>(r) * ys0 + c * ys1;
  T acc = *d;
  for (int64_t k = j; k < n && keys[k] == r; ++k)
    acc = store<T>(static_cast<A>(load(acc)) + static_cast<A>(load(x[pos[k] * xs0 + c * xs1])));
  *d = acc;
}

template <class T, class I>
void index_add_grouped(Context& ctx, const TensorView& x, const TensorView& index, const TensorView& y,
                       unsigned long long* bad) {
  const int64_t n = index.numel(), cols = y.sizes[1], extent = y.sizes[0];
  DeviceBuffer keys_in(ctx, static_cast<size_t>(n) * sizeof(I)), keys(ctx, static_cast<size_t>(n) * sizeof(I));
  DeviceBuffer pos_in(ctx, static_cast<size_t>(n) * sizeof(int64_t)), pos(ctx, static_cast<size_t>(n) * sizeof(int64_t));
  index_keys_kernel<I><<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, ctx.stream>>>(
      index.ptr<const I>(), index.strides[0], n, keys_in.as<I>(), pos_in.as<int64_t>());
  STRATA_CUDA_CHECK_LAUNCH("index_add index_keys_kernel");
  STRATA_CHECK(n <= std::numeric_limits<int>::max(), "index_add: ", n, " index entries do not fit CUB's int");
  size_t temp_bytes = 0;
  STRATA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.as<const I>(), keys.as<I>(),
                                                    pos_in.as<const int64_t>(), pos.as<int64_t>(), static_cast<int>(n),
                                                    0, static_cast<int>(sizeof(I) * 8), ctx.stream));
  DeviceBuffer temp(ctx, std::max<size_t>(temp_bytes, 1));
  STRATA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys_in.as<const I>(), keys.as<I>(),
                                                    pos_in.as<const int64_t>(), pos.as<int64_t>(), static_cast<int>(n),
                                                    0, static_cast<int>(sizeof(I) * 8), ctx.stream));
  const int threads = static_cast<int>(std::min<int64_t>(cols, 256));
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>((cols + threads - 1) / threads));
  index_add_grouped_kernel<T, I><<<grid, threads, 0, ctx.stream>>>(x.ptr<const T>(), x.strides[0], x.strides[1],
                                                                   y.ptr<T>(), y.strides[0], y.strides[1], keys.as<const I>(),
                                                                   pos.as<const int64_t>(), n, cols, extent, bad);
  STRATA_CUDA_CHECK_LAUNCH("index_add_grouped_kernel");
}

template <class F>
void dispatch_index(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::i64: f(int64_t{}); return;
    case DType::i32: f(int32_t{}); return;
    default: break;
  }
  STRATA_FAIL(op, ": argument 'index' must be i64 or i32, got ", dtype_name(t));
}

// f(E{}) with E an unsigned integer of the dtype's size: elements moved as bytes.
template <class F>
void dispatch_bytes(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint64_t{}); return;
    default: break;
  }
  STRATA_FAIL("index_select: no element type of ", dtype_size(t), " bytes");
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::compare(const CompareArgs& a) {
  dispatch_all(a.a.dtype, [&](auto t) {
    using T = decltype(t);
    visit_compare(a.fn, [&](auto fn) {
      launch_elementwise(*ctx_, strided_by_output(a.y.sizes, a.a, a.b, a.y),
                         CompareK<decltype(fn)::value, T>{a.a.ptr<T>(), a.b.ptr<T>(), a.y.ptr<uint8_t>()});
    });
  });
}

void CudaBackend::where(const WhereArgs& a) {
  dispatch_float(a.y.dtype, "where", [&](auto t) {
    using T = decltype(t);
    launch_elementwise(*ctx_, strided_by_output(a.y.sizes, a.cond, a.a, a.b, a.y),
                       WhereK<T>{a.cond.ptr<uint8_t>(), a.a.ptr<T>(), a.b.ptr<T>(), a.y.ptr<T>()});
  });
}

void CudaBackend::reduce_dims(const ReduceDimsArgs& a) {
  const int nd = a.x.dim();
  Shape reduced = a.x.sizes;  // the reduced dims' extents, 1 on the kept ones
  for (int d = 0; d < nd; ++d)
    if (a.y.sizes[d] == a.x.sizes[d]) reduced[d] = 1;
  const int64_t outputs = a.y.numel(), count = reduced.numel();
  if (outputs == 0) return;
  const Strided<2> outer = make_strided<2>(a.y.sizes, {a.x.strides, a.y.strides});
  const Strided<1> inner = make_strided<1>(reduced, {a.x.strides});
  const bool unit = inner.strides[0][inner.nd - 1] == 1;
  dispatch_float(a.x.dtype, "reduce_dims", [&](auto t) {
    using T = decltype(t);
    const auto launch = [&](auto fn) {
      constexpr ReduceFn Fn = decltype(fn)::value;
      with_group(group_for(*ctx_, outputs, count, unit), [&](auto g) {
        constexpr int G = decltype(g)::value;
        reduce_dims_kernel<G, T, Fn><<<grid_for(*ctx_, outputs * G), kThreads, 0, ctx_->stream>>>(
            a.x.ptr<T>(), a.y.data, outer, inner, count);
        STRATA_CUDA_CHECK_LAUNCH("reduce_dims_kernel");
      });
    };
    switch (a.fn) {
      case ReduceFn::sum: launch(std::integral_constant<ReduceFn, ReduceFn::sum>{}); return;
      case ReduceFn::mean: launch(std::integral_constant<ReduceFn, ReduceFn::mean>{}); return;
      case ReduceFn::max: launch(std::integral_constant<ReduceFn, ReduceFn::max>{}); return;
      case ReduceFn::min: launch(std::integral_constant<ReduceFn, ReduceFn::min>{}); return;
      case ReduceFn::argmax: launch(std::integral_constant<ReduceFn, ReduceFn::argmax>{}); return;
      case ReduceFn::argmin: launch(std::integral_constant<ReduceFn, ReduceFn::argmin>{}); return;
    }
    STRATA_FAIL("reduce_dims: unknown reduction ", static_cast<int>(a.fn));
  });
}

void CudaBackend::softmax_fwd(const SoftmaxArgs& a) {
  const int dim = a.dim;
  Shape outer = a.x.sizes;
  outer[dim] = 1;
  const int64_t n = a.x.sizes[dim], rows = outer.numel();
  if (rows == 0 || n == 0) return;
  const Strided<2> s = make_strided<2>(outer, {a.x.strides, a.y.strides});
  const int64_t sx = a.x.strides[dim], sy = a.y.strides[dim];
  dispatch_float(a.x.dtype, "softmax_fwd", [&](auto t) {
    using T = decltype(t);
    with_group(group_for(*ctx_, rows, n, sx == 1), [&](auto g) {
      constexpr int G = decltype(g)::value;
      softmax_fwd_kernel<G, T><<<grid_for(*ctx_, rows * G), kThreads, 0, ctx_->stream>>>(
          a.x.ptr<T>(), a.y.ptr<T>(), s, n, sx, sy, a.log);
      STRATA_CUDA_CHECK_LAUNCH("softmax_fwd_kernel");
    });
  });
}

void CudaBackend::softmax_bwd(const SoftmaxBwdArgs& a) {
  const int dim = a.dim;
  Shape outer = a.y.sizes;
  outer[dim] = 1;
  const int64_t n = a.y.sizes[dim], rows = outer.numel();
  if (rows == 0 || n == 0) return;
  const Strided<3> s = make_strided<3>(outer, {a.y.strides, a.dy.strides, a.dx.strides});
  const int64_t sy = a.y.strides[dim], sdy = a.dy.strides[dim], sdx = a.dx.strides[dim];
  dispatch_float(a.y.dtype, "softmax_bwd", [&](auto t) {
    using T = decltype(t);
    with_group(group_for(*ctx_, rows, n, sy == 1), [&](auto g) {
      constexpr int G = decltype(g)::value;
      softmax_bwd_kernel<G, T><<<grid_for(*ctx_, rows * G), kThreads, 0, ctx_->stream>>>(
          a.y.ptr<T>(), a.dy.ptr<T>(), a.dx.ptr<T>(), s, n, sy, sdy, sdx, a.log);
      STRATA_CUDA_CHECK_LAUNCH("softmax_bwd_kernel");
    });
  });
}

// y's elements in y's memory order; x read at the indexed dim's origin plus index[i] rows,
// i the element's position along the dim (the stride-1 "operand" pos gives it).
void CudaBackend::index_select(const IndexSelectArgs& a) {
  observe_call(OpId::index_select, a);
  const int dim = a.dim;
  const int64_t extent = a.x.sizes[dim];
  if (a.y.numel() == 0) return;
  observe_library(LibraryCall::Kind::own_kernel);
  Shape x_strides = a.x.strides, pos_strides;
  x_strides[dim] = 0;
  for (int d = 0; d < a.y.dim(); ++d) pos_strides.push_back(d == dim ? 1 : 0);
  const TensorView xs = reshaped(a.x, a.y.sizes, x_strides), pos = reshaped(a.y, a.y.sizes, pos_strides);
  raise_bad_index(*ctx_);  // an earlier call's, found since
  unsigned long long* bad = bad_index_word(*ctx_);
  dispatch_index(a.index.dtype, "index_select", [&](auto it) {
    using I = decltype(it);
    dispatch_bytes(a.x.dtype, [&](auto e) {
      using E = decltype(e);
      launch_elementwise(*ctx_, strided_by_output(a.y.sizes, xs, pos, a.y),
                         IndexSelectK<E, I>{a.x.ptr<E>(), a.y.ptr<E>(), a.index.ptr<I>(), a.index.strides[0],
                                            a.x.strides[dim], extent, bad});
    });
  });
  note_bad_index(*ctx_, IndexCheck::index_select, a.index, extent);
}

void CudaBackend::index_add(const IndexAddArgs& a) {
  const int dim = a.dim;
  const int64_t extent = a.y.sizes[dim], n = a.index.numel();
  Shape slice = a.x.sizes;
  slice[dim] = 1;
  if (slice.numel() == 0 || n == 0) return;
  raise_bad_index(*ctx_);
  unsigned long long* bad = bad_index_word(*ctx_);
  dispatch_index(a.index.dtype, "index_add", [&](auto it) {
    using I = decltype(it);
    dispatch_float(a.y.dtype, "index_add", [&](auto t) {
      using T = decltype(t);
      if (dim == 0 && a.y.dim() == 2 && n >= kGroupedIndexAddRows) {
        index_add_grouped<T, I>(*ctx_, a.x, a.index, a.y, bad);
        return;
      }
      launch_elementwise(*ctx_, strided_by_output(slice, a.x, a.y),
                         IndexAddK<T, I>{a.x.ptr<T>(), a.y.ptr<T>(), a.index.ptr<I>(), a.index.strides[0], n,
                                         a.x.strides[dim], a.y.strides[dim], extent, bad});
    });
  });
  note_bad_index(*ctx_, IndexCheck::index_add, a.index, extent);
}

}  // namespace strata::backends
