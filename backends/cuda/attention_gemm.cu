#include "strata/backends/cuda/attention_gemm.h"

#include <algorithm>
#include <cmath>

#include "strata/backends/cuda/cudnn_util.h"
#include "strata/backends/cuda/kernels.cuh"

namespace strata::backends::cuda {

using ops::TensorView;

namespace {

// Shorter rows stay with strata's kernels: a decoding step's one query, and sequences
// whose [Tq, Tk] scores are too small to pay for three library calls per batch entry.
constexpr int64_t kMinRows = 64;
// The scores and probabilities of one call's heads at a time (a chunk of one batch
// entry's heads) stay under this many bytes.
constexpr size_t kChunkBytes = size_t{256} << 20;
constexpr int kRowsPerBlock = 8;  // a warp per row of scores

// The heads of batch entry b as a strided batch of row-major [T, D] matrices: cuBLAS
// needs unit stride along D and a leading dimension of at least D.
struct Heads {
  int64_t ld = 0, head_stride = 0;
};
bool heads_of(const TensorView& v, Heads& h) {
  const int64_t t = v.sizes[2], d = v.sizes[3];
  if (d > 1 && v.strides[3] != 1) return false;
  h.ld = t == 1 ? d : v.strides[2];
  h.head_stride = v.strides[1];
  return h.ld >= d && h.ld <= 0x7fffffff && h.head_stride >= 0;
}

template <class T>
cudaDataType_t blas_dtype() {
  if constexpr (std::is_same_v<T, __half>)
    return CUDA_R_16F;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return CUDA_R_16BF;
  else
    return CUDA_R_32F;
}

// The keys query i of tq sees among tk (causal: the queries are the last tq positions).
__device__ __forceinline__ int64_t keys_of(int64_t i, int64_t tq, int64_t tk, bool causal) {
  return causal ? min(tk, max(int64_t{0}, i + tk - tq + 1)) : tk;
}

struct RowShape {
  int64_t rows, tq, tk;  // rows = heads of the chunk * tq
  bool causal;
  float scale;
};

// Row r = (head h, query i) of the chunk's scores s [rows, tk]: lse = log sum exp(scale s)
// over the keys the query sees, p = exp(scale s - lse) there and 0 elsewhere.
// lse(h, i) sits at lse + h * lh + i * li.
template <class T, class S>
__global__ void softmax_rows_kernel(const float* s, T* p, S* lse, int64_t lh, int64_t li, RowShape sh) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= sh.rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t h = r / sh.tq, i = r % sh.tq, keys = keys_of(i, sh.tq, sh.tk, sh.causal);
  const float* row = s + r * sh.tk;
  float mx = -INFINITY;
  for (int64_t j = lane; j < keys; j += 32) mx = fmaxf(mx, row[j] * sh.scale);
  mx = warp_max(mx);
  float sum = 0;
  for (int64_t j = lane; j < keys; j += 32) sum += expf(row[j] * sh.scale - mx);
  sum = warp_sum(sum);
  const float l = keys > 0 ? mx + logf(sum) : -INFINITY;
  T* out = p + r * sh.tk;
  for (int64_t j = lane; j < sh.tk; j += 32) out[j] = store<T>(j < keys ? expf(row[j] * sh.scale - l) : 0.f);
  if (lane == 0) lse[h * lh + i * li] = static_cast<S>(l);
}

// The backward's probabilities from the forward's lse, as the forward wrote them.
template <class T, class S>
__global__ void probs_rows_kernel(const float* s, T* p, const S* lse, int64_t lh, int64_t li, RowShape sh) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= sh.rows) return;
  const int64_t h = r / sh.tq, i = r % sh.tq, keys = keys_of(i, sh.tq, sh.tk, sh.causal);
  const float l = static_cast<float>(lse[h * lh + i * li]);
  const float* row = s + r * sh.tk;
  T* out = p + r * sh.tk;
  for (int64_t j = threadIdx.x % 32; j < sh.tk; j += 32)
    out[j] = store<T>(j < keys ? expf(row[j] * sh.scale - l) : 0.f);
}

// dS = P (dP - delta), P recomputed in f32 from the scores (not read back rounded to T).
template <class T, class S>
__global__ void dscores_rows_kernel(const float* s, const float* dp, T* ds, const S* lse, int64_t lh, int64_t li,
                                    const S* delta, int64_t dh, int64_t di_stride, RowShape sh) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= sh.rows) return;
  const int64_t h = r / sh.tq, i = r % sh.tq, keys = keys_of(i, sh.tq, sh.tk, sh.causal);
  const float l = static_cast<float>(lse[h * lh + i * li]), di = static_cast<float>(delta[h * dh + i * di_stride]);
  const float* srow = s + r * sh.tk;
  const float* dprow = dp + r * sh.tk;
  T* out = ds + r * sh.tk;
  for (int64_t j = threadIdx.x % 32; j < sh.tk; j += 32)
    out[j] = store<T>(j < keys ? expf(srow[j] * sh.scale - l) * (dprow[j] - di) : 0.f);
}

// delta(b, h, i) = sum_d dy(b, h, i, d) y(b, h, i, d), a warp per query.
template <class T, class S>
__global__ void delta_kernel(const T* y, const T* dy, S* delta, int64_t B, int64_t H, int64_t tq, int64_t D,
                             int64_t ys0, int64_t ys1, int64_t ys2, int64_t ys3, int64_t gs0, int64_t gs1, int64_t gs2,
                             int64_t gs3, int64_t ds0, int64_t ds1, int64_t ds2) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= B * H * tq) return;
  const int64_t i = r % tq, h = (r / tq) % H, b = r / (tq * H);
  float acc = 0;
  for (int64_t d = threadIdx.x % 32; d < D; d += 32)
    acc += load(y[b * ys0 + h * ys1 + i * ys2 + d * ys3]) * load(dy[b * gs0 + h * gs1 + i * gs2 + d * gs3]);
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) delta[b * ds0 + h * ds1 + i * ds2] = static_cast<S>(acc);
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

int blas_int(int64_t v) { return static_cast<int>(v); }  // every size was checked against int's range

// One strided-batched GEMM over `batch` heads, in cuBLAS's column-major terms (the callers
// name each product in row-major terms and pass it transposed: C^T = B^T A^T).
struct Mat {
  const void* p;
  cudaDataType_t type;
  int64_t ld, stride;
};
void gemm_heads(Context& ctx, cublasComputeType_t compute, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                int64_t n, int64_t k, float alpha, const Mat& a, const Mat& b, void* c, cudaDataType_t ct,
                int64_t ldc, int64_t c_stride, int64_t batch) {
  const float beta = 0.f;
  STRATA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx.cublas, ta, tb, blas_int(m), blas_int(n), blas_int(k), &alpha,
                                                 a.p, a.type, blas_int(a.ld), a.stride, b.p, b.type, blas_int(b.ld),
                                                 b.stride, &beta, c, ct, blas_int(ldc), c_stride, blas_int(batch),
                                                 compute, CUBLAS_GEMM_DEFAULT));
}

bool takes_shape(const TensorView& q, const TensorView& k, const TensorView& kv_len) {
  if (kv_len.defined || q.dtype == DType::f64) return false;
  const int64_t tq = q.sizes[2], tk = k.sizes[2], d = q.sizes[3];
  return tq >= kMinRows && tk >= kMinRows && d > 0 && tq <= 0x7fffffff && tk <= 0x7fffffff && d <= 0x7fffffff;
}

// Heads per chunk: as many as keep `per_head` bytes each under kChunkBytes, at least one.
int64_t chunk_heads(int64_t H, size_t per_head) {
  return std::clamp<int64_t>(static_cast<int64_t>(kChunkBytes / std::max<size_t>(per_head, 1)), 1, H);
}

template <class T>
const T* head_ptr(const TensorView& v, int64_t b, int64_t h) {
  return v.ptr<const T>() + b * v.strides[0] + h * v.strides[1];
}
template <class T>
T* head_ptr_mut(const TensorView& v, int64_t b, int64_t h) {
  return v.ptr<T>() + b * v.strides[0] + h * v.strides[1];
}

cublasComputeType_t compute_for(DType dt, const Settings& s) {
  return dt == DType::f32 && s.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace

bool gemm_attention_fwd(Context& ctx, const Settings& s, const ops::AttentionFwdArgs& a) {
  Heads hq, hk, hv, hy;
  if (!takes_shape(a.q, a.k, a.kv_len) || !heads_of(a.q, hq) || !heads_of(a.k, hk) || !heads_of(a.v, hv) ||
      !heads_of(a.y, hy))
    return false;
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], tk = a.k.sizes[2], D = a.q.sizes[3];
  dispatch_float(a.q.dtype, "attention_fwd", [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, double>) {
      using S = float;
      const cudaDataType_t dt = blas_dtype<T>();
      const cublasComputeType_t compute = compute_for(a.q.dtype, s);
      const int64_t score = tq * tk;
      const int64_t hc = chunk_heads(H, static_cast<size_t>(score) * (sizeof(float) + sizeof(T)));
      DeviceBuffer sbuf(ctx, static_cast<size_t>(hc * score) * sizeof(float));
      DeviceBuffer pbuf(ctx, static_cast<size_t>(hc * score) * sizeof(T));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h0 = 0; h0 < H; h0 += hc) {
          const int64_t n = std::min(hc, H - h0);
          // S^T [tk, tq] = k q^T: k read transposed, q as stored.
          gemm_heads(ctx, compute, CUBLAS_OP_T, CUBLAS_OP_N, tk, tq, D, 1.f,
                     {head_ptr<T>(a.k, b, h0), dt, hk.ld, hk.head_stride},
                     {head_ptr<T>(a.q, b, h0), dt, hq.ld, hq.head_stride}, sbuf.get(), CUDA_R_32F, tk, score, n);
          const RowShape sh{n * tq, tq, tk, a.causal, static_cast<float>(a.scale)};
          softmax_rows_kernel<T, S><<<row_blocks(sh.rows), kRowsPerBlock * 32, 0, ctx.stream>>>(
              sbuf.as<float>(), pbuf.as<T>(), a.lse.ptr<S>() + b * a.lse.strides[0] + h0 * a.lse.strides[1],
              a.lse.strides[1], a.lse.strides[2], sh);
          STRATA_CUDA_CHECK_LAUNCH("attention_fwd softmax_rows_kernel");
          // y^T [D, tq] = v^T P^T.
          gemm_heads(ctx, compute, CUBLAS_OP_N, CUBLAS_OP_N, D, tq, tk, 1.f,
                     {head_ptr<T>(a.v, b, h0), dt, hv.ld, hv.head_stride}, {pbuf.get(), dt, tk, score},
                     head_ptr_mut<T>(a.y, b, h0), dt, hy.ld, hy.head_stride, n);
        }
    }
  });
  ++ctx.gemm_attentions;
  return true;
}

bool gemm_attention_bwd(Context& ctx, const Settings& s, const ops::AttentionBwdArgs& a) {
  Heads hq, hk, hv, hy, hg, hdq, hdk, hdv;
  if (!takes_shape(a.q, a.k, a.kv_len) || !heads_of(a.q, hq) || !heads_of(a.k, hk) || !heads_of(a.v, hv) ||
      !heads_of(a.y, hy) || !heads_of(a.dy, hg) || !heads_of(a.dq, hdq) || !heads_of(a.dk, hdk) ||
      !heads_of(a.dv, hdv))
    return false;
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], tk = a.k.sizes[2], D = a.q.sizes[3];
  dispatch_float(a.q.dtype, "attention_bwd", [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, double>) {
      using S = float;
      const cudaDataType_t dt = blas_dtype<T>();
      const cublasComputeType_t compute = compute_for(a.q.dtype, s);
      delta_kernel<T, S><<<row_blocks(B * H * tq), kRowsPerBlock * 32, 0, ctx.stream>>>(
          a.y.ptr<const T>(), a.dy.ptr<const T>(), a.delta.ptr<S>(), B, H, tq, D, a.y.strides[0], a.y.strides[1],
          a.y.strides[2], a.y.strides[3], a.dy.strides[0], a.dy.strides[1], a.dy.strides[2], a.dy.strides[3],
          a.delta.strides[0], a.delta.strides[1], a.delta.strides[2]);
      STRATA_CUDA_CHECK_LAUNCH("attention_bwd delta_kernel");
      const int64_t score = tq * tk;
      const int64_t hc = chunk_heads(H, static_cast<size_t>(score) * (2 * sizeof(float) + sizeof(T)));
      DeviceBuffer sbuf(ctx, static_cast<size_t>(hc * score) * sizeof(float));
      DeviceBuffer dpbuf(ctx, static_cast<size_t>(hc * score) * sizeof(float));
      DeviceBuffer pbuf(ctx, static_cast<size_t>(hc * score) * sizeof(T));  // P, then dS
      const float sc = static_cast<float>(a.scale);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h0 = 0; h0 < H; h0 += hc) {
          const int64_t n = std::min(hc, H - h0);
          const Mat q{head_ptr<T>(a.q, b, h0), dt, hq.ld, hq.head_stride};
          const Mat k{head_ptr<T>(a.k, b, h0), dt, hk.ld, hk.head_stride};
          const Mat v{head_ptr<T>(a.v, b, h0), dt, hv.ld, hv.head_stride};
          const Mat dy{head_ptr<T>(a.dy, b, h0), dt, hg.ld, hg.head_stride};
          const Mat p{pbuf.get(), dt, tk, score};
          const S* lse = a.lse.ptr<const S>() + b * a.lse.strides[0] + h0 * a.lse.strides[1];
          const S* delta = a.delta.ptr<const S>() + b * a.delta.strides[0] + h0 * a.delta.strides[1];
          const RowShape sh{n * tq, tq, tk, a.causal, sc};
          gemm_heads(ctx, compute, CUBLAS_OP_T, CUBLAS_OP_N, tk, tq, D, 1.f, k, q, sbuf.get(), CUDA_R_32F, tk, score, n);
          probs_rows_kernel<T, S><<<row_blocks(sh.rows), kRowsPerBlock * 32, 0, ctx.stream>>>(
              sbuf.as<const float>(), pbuf.as<T>(), lse, a.lse.strides[1], a.lse.strides[2], sh);
          STRATA_CUDA_CHECK_LAUNCH("attention_bwd probs_rows_kernel");
          // dv^T [D, tk] = dy^T P.
          gemm_heads(ctx, compute, CUBLAS_OP_N, CUBLAS_OP_T, D, tk, tq, 1.f, dy, p, head_ptr_mut<T>(a.dv, b, h0), dt,
                     hdv.ld, hdv.head_stride, n);
          // dP^T [tk, tq] = v dy^T.
          gemm_heads(ctx, compute, CUBLAS_OP_T, CUBLAS_OP_N, tk, tq, D, 1.f, v, dy, dpbuf.get(), CUDA_R_32F, tk, score,
                     n);
          dscores_rows_kernel<T, S><<<row_blocks(sh.rows), kRowsPerBlock * 32, 0, ctx.stream>>>(
              sbuf.as<const float>(), dpbuf.as<const float>(), pbuf.as<T>(), lse, a.lse.strides[1], a.lse.strides[2],
              delta, a.delta.strides[1], a.delta.strides[2], sh);
          STRATA_CUDA_CHECK_LAUNCH("attention_bwd dscores_rows_kernel");
          // dq^T [D, tq] = scale k^T dS^T;  dk^T [D, tk] = scale q^T dS.
          gemm_heads(ctx, compute, CUBLAS_OP_N, CUBLAS_OP_N, D, tq, tk, sc, k, p, head_ptr_mut<T>(a.dq, b, h0), dt,
                     hdq.ld, hdq.head_stride, n);
          gemm_heads(ctx, compute, CUBLAS_OP_N, CUBLAS_OP_T, D, tk, tq, sc, q, p, head_ptr_mut<T>(a.dk, b, h0), dt,
                     hdk.ld, hdk.head_stride, n);
        }
    }
  });
  ++ctx.gemm_attentions;
  return true;
}

}  // namespace strata::backends::cuda
