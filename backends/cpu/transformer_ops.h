#pragma once
// The transformer's fused ops as loops over any strides, each computed in A (T on the CPU
// backends, double on the reference backend, the oracle): layer norm over the rows of a
// matrix and scaled dot-product attention (op_args.h defines both), with their backward.
// openblas, onednn and eigen run these; backends/cuda/layer_norm.cu and attention.cu compute the same
// definitions.
//
// Attention never holds the [Tq, Tk] matrix: each query's scores are one row of Tk values,
// and the backward recomputes the probabilities from the forward's log-sum-exp, as
// FlashAttention does (Dao et al., "FlashAttention: Fast and Memory-Efficient Exact
// Attention with IO-Awareness", 2022). The (batch, head) pairs are independent and run on
// the OpenMP threads where the backend is built with them; within a pair the order of every
// sum is fixed, so the results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "strata/backends/cpu/strided.h"
#include "strata/backends/cpu/threads.h"
#include "strata/ops/table/op_args.h"

namespace strata::backends::loops {

// The forward loops' arithmetic over plain pointers: one row of layer norm, the queries of one
// (batch, head) pair of attention. The code between "codegen:begin" and "codegen:end" is also
// written, as it is, into the programs codegen/ generates, so that they compute these values as
// the loops below do. A: the type the values are computed in; S: the statistics' storage type.
// codegen:begin transformer_loops
// n values at data[i * stride]; null data: none.
template <class T>
struct Strided1 {
  T* data;
  int64_t stride;
};
// A matrix at data[i * row_stride + j * col_stride].
template <class T>
struct Strided2 {
  T* data;
  int64_t row_stride, col_stride;
  T& at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// A row of c values: y = (x - mean) / sqrt(var + eps) * w + b (biased variance; w and b optional);
// its mean and 1 / std into *mean and *rstd.
template <class T, class A = T, class S = T>
void layer_norm_row(Strided1<const T> x, Strided1<const T> w, Strided1<const T> b, Strided1<T> y, int64_t c,
                    double eps, S* mean, S* rstd) {
  A s = 0;
  for (int64_t j = 0; j < c; ++j) s += A(x.data[j * x.stride]);
  const A mu = s / A(c);
  A q = 0;
  for (int64_t j = 0; j < c; ++j) {
    const A d = A(x.data[j * x.stride]) - mu;
    q += d * d;
  }
  const A rs = A(1) / std::sqrt(q / A(c) + A(eps));
  for (int64_t j = 0; j < c; ++j) {
    A v = (A(x.data[j * x.stride]) - mu) * rs;
    if (w.data) v = v * A(w.data[j * w.stride]);
    if (b.data) v = v + A(b.data[j * b.stride]);
    y.data[j * y.stride] = static_cast<T>(v);
  }
  *mean = static_cast<S>(mu);
  *rstd = static_cast<S>(rs);
}

// The keys query i of tq may see, of `keys`: [0, limit), none before a cache's fill.
inline int64_t visible_key_count(bool causal, int64_t i, int64_t tq, int64_t keys) {
  return std::max<int64_t>(0, causal ? std::min(keys, i + keys - tq + 1) : keys);
}

// One (batch, head) pair's sizes: tq queries, tk key rows of which the first keys_held are keys,
// head width d.
struct AttentionDims {
  int64_t tq, tk, keys_held, d;
  bool causal;
};

// The pair's queries q [tq, d] against k and v [tk, d]: y [tq, d] and the log-sum-exp of each
// query's scores into lse [tq]. A query with no visible key gets zeros and -inf.
template <class T, class A = T, class S = T>
void attention_pair(Strided2<const T> q, Strided2<const T> k, Strided2<const T> v, Strided2<T> y, Strided1<S> lse,
                    const AttentionDims& n, A scale) {
  std::vector<A> p(static_cast<size_t>(n.tk)), acc(static_cast<size_t>(n.d));
  for (int64_t i = 0; i < n.tq; ++i) {
    const int64_t keys = visible_key_count(n.causal, i, n.tq, n.keys_held);
    A mx = -std::numeric_limits<A>::infinity();
    for (int64_t j = 0; j < keys; ++j) {
      A s = 0;
      for (int64_t d = 0; d < n.d; ++d) s += A(q.at(i, d)) * A(k.at(j, d));
      p[j] = s * scale;
      mx = std::max(mx, p[j]);
    }
    A sum = 0;
    for (int64_t j = 0; j < keys; ++j) sum += (p[j] = std::exp(p[j] - mx));
    std::fill(acc.begin(), acc.end(), A(0));
    for (int64_t j = 0; j < keys; ++j)
      for (int64_t d = 0; d < n.d; ++d) acc[d] += p[j] * A(v.at(j, d));
    for (int64_t d = 0; d < n.d; ++d) y.at(i, d) = static_cast<T>(keys > 0 ? acc[d] / sum : A(0));
    lse.data[i * lse.stride] = static_cast<S>(keys > 0 ? mx + std::log(sum) : -std::numeric_limits<A>::infinity());
  }
}
// codegen:end

namespace detail {
// Element (i, j) of a 2-D view, or (b, h, t, d) of a 4-D one, as an offset.
inline int64_t at2(const ops::TensorView& v, int64_t i, int64_t j) { return i * v.strides[0] + j * v.strides[1]; }
inline int64_t at4(const ops::TensorView& v, int64_t b, int64_t h, int64_t t, int64_t d) {
  return b * v.strides[0] + h * v.strides[1] + t * v.strides[2] + d * v.strides[3];
}
inline int pool_threads(const Work& w) {
#ifdef _OPENMP
  return threads_for(w, omp_get_max_threads());
#else
  (void)w;
  return 1;
#endif
}
// The keys k holds: its first kv_len rows when given (clamped to [0, Tk]), else all Tk.
template <class Args>
int64_t key_count(const Args& a, int64_t tk) {
  return a.kv_len.defined ? std::clamp<int64_t>(a.kv_len.template ptr<const int64_t>()[0], 0, tk) : tk;
}
// The keys query i of tq may see, of `keys`: [0, limit), none before a cache's fill.
template <class Args>
int64_t visible_keys(const Args& a, int64_t i, int64_t tq, int64_t keys) {
  return visible_key_count(a.causal, i, tq, keys);
}
}  // namespace detail

// S: the statistics' storage type (T on the CPU, where f32 and f64 are the float dtypes).
template <class T, class A = T, class S = T>
void layer_norm_fwd(const ops::LayerNormFwdArgs& a) {
  const int64_t n = a.x.sizes[0], c = a.x.sizes[1];
  const T* x = a.x.ptr<const T>();
  auto vec = [](const ops::TensorView& v) {
    return Strided1<const T>{v.defined ? v.ptr<const T>() : nullptr, v.defined ? v.strides[0] : 0};
  };
  const Strided1<const T> w = vec(a.weight), b = vec(a.bias);
  T* y = a.y.ptr<T>();
  S* mean = a.mean.ptr<S>();
  S* rstd = a.rstd.ptr<S>();
  const int nt = detail::pool_threads(elementwise_work(n * c));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
  for (int64_t r = 0; r < n; ++r)
    layer_norm_row<T, A, S>(Strided1<const T>{x + r * a.x.strides[0], a.x.strides[1]}, w, b,
                            Strided1<T>{y + r * a.y.strides[0], a.y.strides[1]}, c, a.eps, &mean[r * a.mean.strides[0]],
                            &rstd[r * a.rstd.strides[0]]);
  (void)nt;
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy * weight; dweight = sum dy xhat,
// dbias = sum dy over the rows, in row order.
template <class T, class A = T, class S = T>
void layer_norm_bwd(const ops::LayerNormBwdArgs& a) {
  const int64_t n = a.x.sizes[0], c = a.x.sizes[1];
  const T* x = a.x.ptr<const T>();
  const T* w = a.weight.defined ? a.weight.ptr<const T>() : nullptr;
  const T* dy = a.dy.ptr<const T>();
  const S* mean = a.mean.ptr<const S>();
  const S* rstd = a.rstd.ptr<const S>();
  auto xhat = [&](int64_t r, int64_t j) {
    return (A(x[detail::at2(a.x, r, j)]) - A(mean[r * a.mean.strides[0]])) * A(rstd[r * a.rstd.strides[0]]);
  };
  auto wj = [&](int64_t j) { return w ? A(w[j * a.weight.strides[0]]) : A(1); };
  if (a.dx.defined) {
    T* dx = a.dx.ptr<T>();
    const int nt = detail::pool_threads(elementwise_work(n * c));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
    for (int64_t r = 0; r < n; ++r) {
      A sg = 0, sgx = 0;
      for (int64_t j = 0; j < c; ++j) {
        const A g = A(dy[detail::at2(a.dy, r, j)]) * wj(j);
        sg += g;
        sgx += g * xhat(r, j);
      }
      const A mg = sg / A(c), mgx = sgx / A(c), rs = A(rstd[r * a.rstd.strides[0]]);
      for (int64_t j = 0; j < c; ++j) {
        const A g = A(dy[detail::at2(a.dy, r, j)]) * wj(j);
        dx[detail::at2(a.dx, r, j)] = static_cast<T>(rs * (g - mg - xhat(r, j) * mgx));
      }
    }
    (void)nt;
  }
  if (a.dweight.defined || a.dbias.defined) {
    T* dw = a.dweight.defined ? a.dweight.ptr<T>() : nullptr;
    T* db = a.dbias.defined ? a.dbias.ptr<T>() : nullptr;
    for (int64_t j = 0; j < c; ++j) {
      A sw = 0, sb = 0;
      for (int64_t r = 0; r < n; ++r) {
        const A g = A(dy[detail::at2(a.dy, r, j)]);
        sw += g * xhat(r, j);
        sb += g;
      }
      if (dw) dw[j * a.dweight.strides[0]] = static_cast<T>(sw);
      if (db) db[j * a.dbias.strides[0]] = static_cast<T>(sb);
    }
  }
}

// A decoding step's rows into the cache (op_args.h): k_new's and v_new's row t at row positions[t]
// of k and v; a position outside [0, Tk) writes nothing (the front end refuses one on the host).
template <class T>
void append_rows(const ops::AttentionFwdArgs& a) {
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], D = a.q.sizes[3], tk = a.k.sizes[2];
  const int64_t* pos = a.positions.ptr<const int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < tq; ++t) {
        const int64_t j = pos[t * a.positions.strides[0]];
        if (j < 0 || j >= tk) continue;
        for (int64_t d = 0; d < D; ++d) {
          a.k.ptr<T>()[detail::at4(a.k, b, h, j, d)] = a.k_new.ptr<const T>()[detail::at4(a.k_new, b, h, t, d)];
          a.v.ptr<T>()[detail::at4(a.v, b, h, j, d)] = a.v_new.ptr<const T>()[detail::at4(a.v_new, b, h, t, d)];
        }
      }
}

template <class T, class A = T, class S = T>
void attention_fwd(const ops::AttentionFwdArgs& a) {
  if (a.k_new.defined) append_rows<T>(a);
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], D = a.q.sizes[3], tk = a.k.sizes[2];
  const AttentionDims dims{tq, tk, detail::key_count(a, tk), D, a.causal};
  const A scale = A(a.scale);
  const int nt = detail::pool_threads(product_work(B * H * tq * tk * D * 2));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    auto pair = [&](const ops::TensorView& v, auto* data) {
      return Strided2<std::remove_pointer_t<decltype(data)>>{data + b * v.strides[0] + h * v.strides[1], v.strides[2],
                                                             v.strides[3]};
    };
    attention_pair<T, A, S>(pair(a.q, a.q.ptr<const T>()), pair(a.k, a.k.ptr<const T>()), pair(a.v, a.v.ptr<const T>()),
                            pair(a.y, a.y.ptr<T>()),
                            Strided1<S>{a.lse.ptr<S>() + b * a.lse.strides[0] + h * a.lse.strides[1], a.lse.strides[2]},
                            dims, scale);
  }
  (void)nt;
}

// With P_ij = exp(scale q_i . k_j - lse_i) and delta_i = dy_i . y_i:
//   dv_j = sum_i P_ij dy_i, dS_ij = P_ij (dy_i . v_j - delta_i),
//   dq_i = scale sum_j dS_ij k_j, dk_j = scale sum_i dS_ij q_i.
template <class T, class A = T, class S = T>
void attention_bwd(const ops::AttentionBwdArgs& a) {
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], D = a.q.sizes[3], tk = a.k.sizes[2];
  const T* q = a.q.ptr<const T>();
  const T* k = a.k.ptr<const T>();
  const T* v = a.v.ptr<const T>();
  const T* y = a.y.ptr<const T>();
  const T* dy = a.dy.ptr<const T>();
  const S* lse = a.lse.ptr<const S>();
  S* delta = a.delta.ptr<S>();
  T* dq = a.dq.ptr<T>();
  T* dk = a.dk.ptr<T>();
  T* dv = a.dv.ptr<T>();
  const A scale = A(a.scale);
  const int64_t keys_held = detail::key_count(a, tk);
  const int nt = detail::pool_threads(product_work(B * H * tq * tk * D * 4));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    auto stat = [&](const ops::TensorView& s, int64_t i) { return b * s.strides[0] + h * s.strides[1] + i * s.strides[2]; };
    // Accumulated in A over the queries, written once: dk and dv [Tk, D].
    std::vector<A> gk(static_cast<size_t>(tk * D), A(0)), gv(static_cast<size_t>(tk * D), A(0)), gq(static_cast<size_t>(D));
    for (int64_t i = 0; i < tq; ++i) {
      A di = 0;
      for (int64_t d = 0; d < D; ++d) di += A(dy[detail::at4(a.dy, b, h, i, d)]) * A(y[detail::at4(a.y, b, h, i, d)]);
      delta[stat(a.delta, i)] = static_cast<S>(di);
      const A li = A(lse[stat(a.lse, i)]);
      const int64_t keys = detail::visible_keys(a, i, tq, keys_held);
      std::fill(gq.begin(), gq.end(), A(0));
      for (int64_t j = 0; j < keys; ++j) {
        A s = 0, dp = 0;
        for (int64_t d = 0; d < D; ++d) {
          s += A(q[detail::at4(a.q, b, h, i, d)]) * A(k[detail::at4(a.k, b, h, j, d)]);
          dp += A(dy[detail::at4(a.dy, b, h, i, d)]) * A(v[detail::at4(a.v, b, h, j, d)]);
        }
        const A p = std::exp(s * scale - li), ds = p * (dp - di);
        for (int64_t d = 0; d < D; ++d) {
          gv[j * D + d] += p * A(dy[detail::at4(a.dy, b, h, i, d)]);
          gk[j * D + d] += scale * ds * A(q[detail::at4(a.q, b, h, i, d)]);
          gq[d] += scale * ds * A(k[detail::at4(a.k, b, h, j, d)]);
        }
      }
      for (int64_t d = 0; d < D; ++d) dq[detail::at4(a.dq, b, h, i, d)] = static_cast<T>(gq[d]);
    }
    for (int64_t j = 0; j < tk; ++j)
      for (int64_t d = 0; d < D; ++d) {
        dk[detail::at4(a.dk, b, h, j, d)] = static_cast<T>(gk[j * D + d]);
        dv[detail::at4(a.dv, b, h, j, d)] = static_cast<T>(gv[j * D + d]);
      }
  }
  (void)nt;
}

}  // namespace strata::backends::loops

// The transformer ops' members of a CPU backend class whose body is these loops; the forward
// ops first call observe(op, args) (loops::unobserved, or the backend's call observer).
#define STRATA_CPU_TRANSFORMER_MEMBERS(Backend) STRATA_CPU_TRANSFORMER_MEMBERS_OBSERVED(Backend, loops::unobserved)
#define STRATA_CPU_TRANSFORMER_MEMBERS_OBSERVED(Backend, observe)                                                   \
  void Backend::layer_norm_fwd(const ::strata::ops::LayerNormFwdArgs& a) {                                          \
    observe(::strata::ops::OpId::layer_norm_fwd, a);                                                                \
    loops::visit_float(kName, "layer_norm_fwd", a.x.dtype, [&](auto t) { loops::layer_norm_fwd<decltype(t)>(a); }); \
  }                                                                                                                 \
  void Backend::layer_norm_bwd(const ::strata::ops::LayerNormBwdArgs& a) {                                          \
    loops::visit_float(kName, "layer_norm_bwd", a.x.dtype, [&](auto t) { loops::layer_norm_bwd<decltype(t)>(a); }); \
  }                                                                                                                 \
  void Backend::attention_fwd(const ::strata::ops::AttentionFwdArgs& a) {                                           \
    observe(::strata::ops::OpId::attention_fwd, a);                                                                 \
    loops::visit_float(kName, "attention_fwd", a.q.dtype, [&](auto t) { loops::attention_fwd<decltype(t)>(a); });   \
  }                                                                                                                 \
  void Backend::attention_bwd(const ::strata::ops::AttentionBwdArgs& a) {                                           \
    loops::visit_float(kName, "attention_bwd", a.q.dtype, [&](auto t) { loops::attention_bwd<decltype(t)>(a); });   \
  }
