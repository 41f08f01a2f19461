// A decoding step's attention on the GPU (attention_decode.h): strata's kernel for a few query
// rows over a cache, and the writing of a step's keys and values into it.
#include <type_traits>

#include "strata/backends/cuda/attention_decode.h"
#include "strata/backends/cuda/attention_shape.cuh"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/backends/cuda/row_views.cuh"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types

namespace {

// A decoding step's few query rows (one per head at batch 1: 12 blocks on 132 SMs) over a
// cache whose rows are dense 16-byte vectors: L = D / V lanes read a key's row in one V-element
// vector each (a warp reads 32 / L keys per load, coalesced), U keys a lane group at once, so
// GPT-2's 384 keys of 64 bf16 values are two round trips to memory where a warp per key waited
// on each (13.2 us a head there, 7.7 with four keys a group at once, 7.1 with eight:
// docs/results/gpt2_vs_pytorch.md); the scores stay in shared memory, and the weighted sum of the
// values runs the same way. With a
// step's new rows (AttentionFwdArgs::k_new; one query per block, so no block reads a row another
// block writes) the block first writes its head's key and value rows into the cache at their
// position and then reads them back as keys: the index_add per cache and its check before it.
// Sums in a fixed order: the same bits from run to run.
constexpr int kDecodeThreads = 256, kDecodeKeys = 8, kDecodeQueries = 4;

template <class T>
struct NewRows {
  View4<const T> k, v;  // [B, H, 1, D]; k.p null: nothing to write
  const int64_t* pos;
};

template <class T, int L>
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_kernel(View4<const T> q, View4<T> k, View4<T> v, View4<T> y, View3<float> lse, AttnShape sh,
                            float scale, NewRows<T> add) {
  constexpr int V = 16 / static_cast<int>(sizeof(T)), G = 32 / L, U = kDecodeKeys;
  using P = Pack<T, V>;
  extern __shared__ float decode_smem[];
  const int groups = static_cast<int>(blockDim.x) / 32 * G;  // key groups in the block
  float* p = decode_smem;                                    // [tk] scores, then weights
  float* part = p + sh.tk;                                   // [groups, D] partial outputs
  float* red = part + groups * sh.D;                         // [32]
  const int64_t row = blockIdx.x, i = row % sh.tq, h = (row / sh.tq) % sh.H, b = row / (sh.tq * sh.H);
  const int lane = static_cast<int>(threadIdx.x % 32), sub = lane % L, warp = static_cast<int>(threadIdx.x / 32);
  const int group = static_cast<int>(threadIdx.x) / L;
  float qv[V];
#pragma unroll
  for (int e = 0; e < V; ++e) qv[e] = static_cast<float>(load(q(b, h, i, sub * V + e)));
  if (add.k.p) {
    const int64_t j = add.pos[0];
    if (j >= 0 && j < sh.tk)
      for (int64_t d = threadIdx.x; d < 2 * sh.D; d += blockDim.x) {
        if (d < sh.D)
          k(b, h, j, d) = add.k(b, h, 0, d);
        else
          v(b, h, j, d - sh.D) = add.v(b, h, 0, d - sh.D);
      }
    __syncthreads();
  }
  const T* kh = k.p + b * k.s0 + h * k.s1 + sub * V;
  const T* vh = v.p + b * v.s0 + h * v.s1 + sub * V;
  const int64_t keys = sh.keys(i), stride = static_cast<int64_t>(groups) * U;
  float mx = -INFINITY;
  // The loop is the warp's (its first key decides), so every lane reaches the shuffles.
  for (int64_t j0 = static_cast<int64_t>(warp) * G; j0 < keys; j0 += stride) {
    P kv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = j0 + lane / L + static_cast<int64_t>(u) * groups;
      if (j < keys) kv[u] = *reinterpret_cast<const P*>(kh + j * k.s2);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = j0 + lane / L + static_cast<int64_t>(u) * groups;
      float s = 0.f;
#pragma unroll
      for (int e = 0; e < V; ++e) s = fmaf(qv[e], j < keys ? static_cast<float>(load(kv[u].v[e])) : 0.f, s);
#pragma unroll
      for (int o = L / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (j < keys) {
        s *= scale;
        if (sub == 0) p[j] = s;
        mx = max(mx, s);
      }
    }
  }
  mx = block_reduce<true>(mx, red);  // its barriers publish p
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) sum += (p[j] = exp(p[j] - mx));
  sum = block_reduce<false>(sum, red);
  __syncthreads();
  float acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = 0.f;
  for (int64_t j0 = group; j0 < keys; j0 += stride) {
    P vv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = j0 + static_cast<int64_t>(u) * groups;
      if (j < keys) vv[u] = *reinterpret_cast<const P*>(vh + j * v.s2);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = j0 + static_cast<int64_t>(u) * groups;
      if (j < keys) {
        const float w = p[j];
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] = fmaf(w, static_cast<float>(load(vv[u].v[e])), acc[e]);
      }
    }
  }
#pragma unroll
  for (int e = 0; e < V; ++e) part[group * sh.D + sub * V + e] = acc[e];
  __syncthreads();
  for (int64_t d = threadIdx.x; d < sh.D; d += blockDim.x) {
    float o = 0.f;
    for (int g = 0; g < groups; ++g) o += part[g * sh.D + d];
    y(b, h, i, d) = store<T>(keys > 0 ? o / sum : 0.f);
  }
  if (threadIdx.x == 0) lse(b, h, i) = keys > 0 ? mx + log(sum) : -INFINITY;
}

// A step's new rows into the cache where the decoding kernel does not take them (more than one
// query per head, or rows it cannot read as vectors): element (b, h, t, d) of k_new and v_new at
// row positions[t]; a position outside [0, Tk) writes nothing.
template <class T>
__global__ void attention_append_kernel(View4<const T> kn, View4<const T> vn, const int64_t* pos, int64_t ps,
                                        View4<T> k, View4<T> v, AttnShape sh) {
  const int64_t n = sh.B * sh.H * sh.tq * sh.D;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = e % sh.D, t = (e / sh.D) % sh.tq, h = (e / (sh.D * sh.tq)) % sh.H, b = e / (sh.D * sh.tq * sh.H);
    const int64_t j = pos[t * ps];
    if (j < 0 || j >= sh.tk) continue;
    k(b, h, j, d) = kn(b, h, t, d);
    v(b, h, j, d) = vn(b, h, t, d);
  }
}

// The decoding kernel's conditions: f32/f16/bf16, a few queries per head (kDecodeQueries; longer
// runs go to the GEMMs) on fewer rows than SMs, one query per head with new rows, a head dim of
// whole 16-byte vectors read by a power of two of lanes, cache rows 16-byte aligned with unit
// stride along D, and the scores and partial sums within 48 KiB.
template <class T>
bool decode_fits(const Context& ctx, const AttentionFwdArgs& a, int& lanes, size_t& smem) {
  constexpr int64_t V = 16 / static_cast<int64_t>(sizeof(T));
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], D = a.q.sizes[3], tk = a.k.sizes[2];
  if (tq > kDecodeQueries || B * H * tq >= ctx.sm_count || (a.k_new.defined && tq != 1) || D % V != 0) return false;
  const int64_t l = D / V;
  if (l > 32 || (l & (l - 1)) != 0) return false;
  for (const TensorView* t : {&a.k, &a.v}) {
    if (t->strides[3] != 1 || reinterpret_cast<uintptr_t>(t->data) % 16 != 0) return false;
    for (int i = 0; i < 3; ++i)
      if (t->sizes[i] > 1 && t->strides[i] % V != 0) return false;
  }
  lanes = static_cast<int>(l);
  const int64_t groups = kDecodeThreads / 32 * (32 / l);
  smem = static_cast<size_t>(tk + groups * D + 32) * sizeof(float);
  return smem <= 48 * 1024;
}

}  // namespace

bool attention_decode(Context& ctx, const AttentionFwdArgs& a) {
  if (a.q.dtype != DType::f32 && a.q.dtype != DType::f16 && a.q.dtype != DType::bf16) return false;
  if (a.q.numel() == 0) return false;
  bool done = false;
  dispatch_float_no_f64(a.q.dtype, "attention_fwd", [&](auto t) {
    using T = decltype(t);
    int lanes = 0;
    size_t smem = 0;
    if (!decode_fits<T>(ctx, a, lanes, smem)) return;
    const AttnShape sh = attn_shape(a.q, a.k, a.causal, a.kv_len);
    const NewRows<T> add{a.k_new.defined ? v4<const T>(a.k_new) : View4<const T>{},
                         a.v_new.defined ? v4<const T>(a.v_new) : View4<const T>{},
                         a.positions.defined ? a.positions.ptr<const int64_t>() : nullptr};
    const auto launch = [&](auto l) {
      constexpr int L = decltype(l)::value;
      attention_decode_kernel<T, L><<<static_cast<unsigned>(sh.B * sh.H * sh.tq), kDecodeThreads, smem, ctx.stream>>>(
          v4<const T>(a.q), v4<T>(a.k), v4<T>(a.v), v4<T>(a.y), v3<float>(a.lse), sh, static_cast<float>(a.scale), add);
    };
    switch (lanes) {
      case 1: launch(std::integral_constant<int, 1>{}); break;
      case 2: launch(std::integral_constant<int, 2>{}); break;
      case 4: launch(std::integral_constant<int, 4>{}); break;
      case 8: launch(std::integral_constant<int, 8>{}); break;
      case 16: launch(std::integral_constant<int, 16>{}); break;
      default: launch(std::integral_constant<int, 32>{}); break;
    }
    STRATA_CUDA_CHECK_LAUNCH("attention_decode_kernel");
    ++ctx.own_attentions;
    done = true;
  });
  return done;
}

void attention_append(Context& ctx, const AttentionFwdArgs& a) {
  const AttnShape sh = attn_shape(a.q, a.k, a.causal, a.kv_len);
  const int64_t n = sh.B * sh.H * sh.tq * sh.D;
  if (n == 0) return;
  dispatch_float(a.q.dtype, "attention_fwd", [&](auto t) {
    using T = decltype(t);
    attention_append_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
        v4<const T>(a.k_new), v4<const T>(a.v_new), a.positions.ptr<const int64_t>(), a.positions.strides[0],
        v4<T>(a.k), v4<T>(a.v), sh);
    STRATA_CUDA_CHECK_LAUNCH("attention_append_kernel");
  });
}

}  // namespace strata::backends::cuda
