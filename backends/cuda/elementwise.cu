// Element-wise ops: add, scale, axpy, fill, relu, dropout; broadcast bias add.
// Any strides; f32, f64, f16, bf16 (arithmetic in float, f64 in double).
#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace cuda {
namespace {

template <class T>
struct ScaleFn {
  const T* x;
  T* y;
  acc_t<T> alpha;
  __device__ void operator()(int64_t, const int64_t* o) const { y[o[1]] = store<T>(alpha * load(x[o[0]])); }
};
template <class T>
struct AxpyFn {
  const T* x;
  T* y;
  acc_t<T> alpha;
  __device__ void operator()(int64_t, const int64_t* o) const {
    y[o[1]] = store<T>(load(y[o[1]]) + alpha * load(x[o[0]]));
  }
};
// codegen:begin cuda_train_kernels fill
template <class T>
struct FillFn {
  T* y;
  T v;
  __device__ void operator()(int64_t, const int64_t* o) const { y[o[0]] = v; }
};
// codegen:end
// codegen:begin cuda_train_kernels dropout
// Element k keeps or drops by the same counter-based hash as every other backend.
template <class T>
struct DropoutFn {
  const T* x;
  T* y;
  uint8_t* m;
  uint64_t seed, offset;
  double p, inv_keep;
  const int64_t* rng;  // {seed, offset} read at run time (graph mode), or null
  __device__ void operator()(int64_t k, const int64_t* o) const {
    const uint64_t s = rng ? static_cast<uint64_t>(rng[0]) : seed;
    const uint64_t off = rng ? static_cast<uint64_t>(rng[1]) : offset;
    const bool keep = ops::dropout_keep(s, off + static_cast<uint64_t>(k), p);
    m[o[2]] = keep ? 1 : 0;
    y[o[1]] = keep ? store<T>(static_cast<double>(load(x[o[0]])) * inv_keep) : store<T>(0.f);
  }
};
template <class T>
struct DropoutBwdFn {
  const T* dy;
  const uint8_t* m;
  T* dx;
  double inv_keep;
  __device__ void operator()(int64_t, const int64_t* o) const {
    dx[o[2]] = m[o[1]] ? store<T>(static_cast<double>(load(dy[o[0]])) * inv_keep) : store<T>(0.f);
  }
};

// codegen:end
// ---- binary ops: y = op(a, b) ------------------------------------------------------
// add, relu (b unused) and relu's backward, each defined once for both paths: when
// every operand is dense in one memory order (the coalesced indexing is a single
// dimension of stride 1) and 16-byte aligned, 16-byte vectors (scalar 2-byte accesses left
// bf16 adds and relus far below the memory's bandwidth: docs/tuning.md); otherwise any strides.
// codegen:begin cuda_kernels binary
template <class T>
struct AddOp {
  __device__ T operator()(T a, T b) const { return store<T>(load(a) + load(b)); }
};
template <class T>
struct ReluOp {  // b unused: relu reads one operand
  __device__ T operator()(T x, T) const { return load(x) > 0 ? x : store<T>(0.f); }
};
template <class T>
struct ReluBwdOp {  // (y, dy)
  __device__ T operator()(T y, T dy) const { return load(y) > 0 ? dy : store<T>(0.f); }
};

template <class T, int V>
struct alignas(sizeof(T) * V) VecOf {
  T v[V];
};

template <class T, int V, class Op>
__global__ void __launch_bounds__(kThreads) dense_binary_kernel(const T* a, const T* b, T* y, int64_t n, Op op) {
  const int64_t nvec = n / V;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = first; i < nvec; i += step) {
    const VecOf<T, V> av = reinterpret_cast<const VecOf<T, V>*>(a)[i];
    const VecOf<T, V> bv = reinterpret_cast<const VecOf<T, V>*>(b)[i];
    VecOf<T, V> yv;
#pragma unroll
    for (int j = 0; j < V; ++j) yv.v[j] = op(av.v[j], bv.v[j]);
    reinterpret_cast<VecOf<T, V>*>(y)[i] = yv;
  }
  const int64_t tail = nvec * V + first;
  if (tail < n) y[tail] = op(a[tail], b[tail]);
}
// codegen:end

template <int N>
bool flat_dense(const Strided<N>& s) {
  if (s.nd != 1) return false;
  for (int i = 0; i < N; ++i)
    if (s.strides[i][0] != 1) return false;
  return true;
}

// codegen:begin cuda_kernels binary_strided
template <class T, class Op>
struct BinaryFn {
  const T* a;
  const T* b;
  T* y;
  Op op;
  __device__ void operator()(int64_t, const int64_t* o) const { y[o[2]] = op(a[o[0]], b[o[1]]); }
};
// codegen:end

// y = op(a, b) over `s` (indexing of a, b, y), vectorised where the operands allow.
template <class T, class Op>
void launch_binary(Context& ctx, const Strided<3>& s, const T* a, const T* b, T* y, Op op) {
  constexpr int V = 16 / sizeof(T);
  bool dense = flat_dense(s) && s.n >= V;
  for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(b), static_cast<const void*>(y)})
    dense = dense && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  if (!dense) return launch_elementwise(ctx, s, BinaryFn<T, Op>{a, b, y, op});
  dense_binary_kernel<T, V, Op><<<grid_for(ctx, s.n / V), kThreads, 0, ctx.stream>>>(a, b, y, s.n, op);
  STRATA_CUDA_CHECK_LAUNCH("dense_binary_kernel");
}

// Past cuDNN's 32-bit limits strata's own kernel runs relu (it indexes in 64 bits).
bool use_cudnn_relu(const TensorView& a, const TensorView& b) {
  return a.dim() == 4 && (a.dtype == DType::f32 || a.dtype == DType::f16) && b.dtype == a.dtype && fits_cudnn(a) &&
         fits_cudnn(b);
}

struct CudnnReluDescriptors : Plan {
  TensorDesc a, b;
  ActDesc act;
};

CudnnReluDescriptors& relu_plan(Context& ctx, const TensorView& a, const TensorView& b) {
  PlanKey key;
  key.add(1001).add(static_cast<int64_t>(a.dtype)).add(a.sizes).add(a.strides).add(b.strides);
  return ctx.plan<CudnnReluDescriptors>(key, [&] {
    auto p = std::make_unique<CudnnReluDescriptors>();
    p->a.set(a, "relu");
    p->b.set(b, "relu");
    STRATA_CUDNN_CHECK(cudnnSetActivationDescriptor(p->act.get(), CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    return p;
  });
}

}  // namespace

void add_along(Context& ctx, const TensorView& y, const TensorView& b, int dim) {
  const TensorView bb = broadcast_along(b, y.sizes, dim);
  dispatch_float(y.dtype, "bias add", [&](auto t) {
    using T = decltype(t);
    launch_binary(ctx, strided_by_output(y.sizes, y, bb, y), y.ptr<T>(), bb.ptr<T>(), y.ptr<T>(), AddOp<T>{});
  });
}

void add_into(Context& ctx, const TensorView& y, const TensorView& x) {
  STRATA_CHECK(x.sizes == y.sizes && x.dtype == y.dtype, "add_into: ", x.sizes.str(), " ", dtype_name(x.dtype),
               " into ", y.sizes.str(), " ", dtype_name(y.dtype));
  dispatch_float(y.dtype, "add_into", [&](auto t) {
    using T = decltype(t);
    launch_binary(ctx, strided_by_output(y.sizes, y, x, y), y.ptr<T>(), x.ptr<T>(), y.ptr<T>(), AddOp<T>{});
  });
}

void fill_view(Context& ctx, const TensorView& y, double value) {
  dispatch_all(y.dtype, [&](auto t) {
    using T = decltype(t);
    // Half types get the same bits as the CPU's conversion (core/dtype.h).
    T v;
    if constexpr (std::is_same_v<T, __half>) {
      __half_raw r;
      r.x = to_f16(static_cast<float>(value)).bits;
      v = __half(r);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      __nv_bfloat16_raw r;
      r.x = to_bf16(static_cast<float>(value)).bits;
      v = __nv_bfloat16(r);
    } else {
      v = static_cast<T>(value);
    }
    launch_elementwise(ctx, strided_by_output(y.sizes, y), FillFn<T>{y.ptr<T>(), v});
  });
}

void relu_fwd_kernel(Context& ctx, const TensorView& x, const TensorView& y) {
  dispatch_float(x.dtype, "relu_fwd", [&](auto t) {
    using T = decltype(t);
    launch_binary(ctx, strided_by_output(x.sizes, x, x, y), x.ptr<T>(), x.ptr<T>(), y.ptr<T>(), ReluOp<T>{});
  });
}

void relu_bwd_kernel(Context& ctx, const TensorView& y, const TensorView& dy, const TensorView& dx) {
  dispatch_float(dy.dtype, "relu_bwd", [&](auto t) {
    using T = decltype(t);
    launch_binary(ctx, strided_by_output(y.sizes, y, dy, dx), y.ptr<T>(), dy.ptr<T>(), dx.ptr<T>(), ReluBwdOp<T>{});
  });
}

}  // namespace cuda

using namespace cuda;

void CudaBackend::add(const AddArgs& a) {
  observe_call(OpId::add, a);
  observe_library(LibraryCall::Kind::own_kernel);
  dispatch_float(a.a.dtype, "add", [&](auto t) {
    using T = decltype(t);
    launch_binary(*ctx_, strided_by_output(a.y.sizes, a.a, a.b, a.y), a.a.ptr<T>(), a.b.ptr<T>(), a.y.ptr<T>(),
                  AddOp<T>{});
  });
}

void CudaBackend::scale(const ScaleArgs& a) {
  dispatch_float(a.x.dtype, "scale", [&](auto t) {
    using T = decltype(t);
    launch_elementwise(*ctx_, strided_by_output(a.y.sizes, a.x, a.y),
                       ScaleFn<T>{a.x.ptr<T>(), a.y.ptr<T>(), static_cast<acc_t<T>>(a.alpha)});
  });
}

void CudaBackend::axpy(const AxpyArgs& a) {
  dispatch_float(a.x.dtype, "axpy", [&](auto t) {
    using T = decltype(t);
    launch_elementwise(*ctx_, strided_by_output(a.y.sizes, a.x, a.y),
                       AxpyFn<T>{a.x.ptr<T>(), a.y.ptr<T>(), static_cast<acc_t<T>>(a.alpha)});
  });
}

void CudaBackend::fill(const FillArgs& a) {
  observe_call(OpId::fill, a);
  observe_library(LibraryCall::Kind::own_kernel);
  fill_view(*ctx_, a.y, a.value);
}

void CudaBackend::relu_fwd(const ReluFwdArgs& a) {
  observe_call(OpId::relu_fwd, a);
  const bool cudnn = use_cudnn_relu(a.x, a.y);
  observe_library(cudnn ? LibraryCall::Kind::activation : LibraryCall::Kind::own_kernel);
  if (!cudnn) return relu_fwd_kernel(*ctx_, a.x, a.y);
  CudnnReluDescriptors& p = relu_plan(*ctx_, a.x, a.y);
  const Scalars s(a.x.dtype);
  STRATA_CUDNN_CHECK(cudnnActivationForward(ctx_->cudnn, p.act.get(), s.one(), p.a.get(), a.x.data, s.zero(),
                                            p.b.get(), a.y.data));
}

void CudaBackend::relu_bwd(const ReluBwdArgs& a) {
  // cudnnActivationBackward needs y, dy and x; for relu x > 0 exactly where y > 0, so
  // y stands in for x. dy and dx must share y's layout for the one-descriptor plan.
  observe_call(OpId::relu_bwd, a);
  const bool same = a.dy.strides == a.y.strides && a.dx.strides == a.y.strides;
  const bool cudnn = use_cudnn_relu(a.y, a.dx) && same;
  observe_library(cudnn ? LibraryCall::Kind::activation_bwd : LibraryCall::Kind::own_kernel);
  if (!cudnn) return relu_bwd_kernel(*ctx_, a.y, a.dy, a.dx);
  CudnnReluDescriptors& p = relu_plan(*ctx_, a.y, a.dx);
  const Scalars s(a.y.dtype);
  STRATA_CUDNN_CHECK(cudnnActivationBackward(ctx_->cudnn, p.act.get(), s.one(), p.a.get(), a.y.data, p.a.get(),
                                             a.dy.data, p.a.get(), a.y.data, s.zero(), p.b.get(), a.dx.data));
}

void CudaBackend::dropout_fwd(const DropoutFwdArgs& a) {
  observe_call(OpId::dropout_fwd, a);
  observe_library(LibraryCall::Kind::own_kernel);
  const double inv_keep = a.p < 1.0 ? 1.0 / (1.0 - a.p) : 0.0;
  STRATA_CHECK(!a.rng.defined || (a.rng.dtype == DType::i64 && a.rng.numel() == 2 && a.rng.is_contiguous() &&
                                  a.rng.device.is_cuda()),
               "dropout_fwd: rng must be a dense i64 {seed, offset} on the device, got ", a.rng.sizes.str(), " ",
               dtype_name(a.rng.dtype));
  const int64_t* rng = a.rng.defined ? a.rng.ptr<const int64_t>() : nullptr;
  dispatch_float(a.x.dtype, "dropout_fwd", [&](auto t) {
    using T = decltype(t);
    launch_elementwise(*ctx_, strided_of(a.x.sizes, a.x, a.y, a.mask),
                       DropoutFn<T>{a.x.ptr<T>(), a.y.ptr<T>(), a.mask.ptr<uint8_t>(), a.seed, a.offset, a.p,
                                    inv_keep, rng});
  });
}

void CudaBackend::dropout_bwd(const DropoutBwdArgs& a) {
  observe_call(OpId::dropout_bwd, a);
  observe_library(LibraryCall::Kind::own_kernel);
  const double inv_keep = a.p < 1.0 ? 1.0 / (1.0 - a.p) : 0.0;
  dispatch_float(a.dy.dtype, "dropout_bwd", [&](auto t) {
    using T = decltype(t);
    launch_elementwise(*ctx_, strided_by_output(a.dy.sizes, a.dy, a.mask, a.dx),
                       DropoutBwdFn<T>{a.dy.ptr<T>(), a.mask.ptr<uint8_t>(), a.dx.ptr<T>(), inv_keep});
  });
}

}  // namespace strata::backends
