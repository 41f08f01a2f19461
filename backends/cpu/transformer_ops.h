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

// The backward's arithmetic over plain pointers, shared with generated training steps as the
// forward's is: one row's dx of layer norm, its weight and bias gradients (column sums in row
// order), and one (batch, head) pair of attention's backward.
// codegen:begin transformer_loops
// dx of one row of c values: rstd (g - mean(g) - xhat mean(g xhat)) with g = dy * w (w optional).
template <class T, class A = T, class S = T>
void layer_norm_bwd_row(Strided1<const T> x, Strided1<const T> w, Strided1<const T> dy, Strided1<T> dx, int64_t c,
                        S mean, S rstd) {
  auto xhat = [&](int64_t j) { return (A(x.data[j * x.stride]) - A(mean)) * A(rstd); };
  auto wj = [&](int64_t j) { return w.data ? A(w.data[j * w.stride]) : A(1); };
  A sg = 0, sgx = 0;
  for (int64_t j = 0; j < c; ++j) {
    const A g = A(dy.data[j * dy.stride]) * wj(j);
    sg += g;
    sgx += g * xhat(j);
  }
  const A mg = sg / A(c), mgx = sgx / A(c), rs = A(rstd);
  for (int64_t j = 0; j < c; ++j) {
    const A g = A(dy.data[j * dy.stride]) * wj(j);
    dx.data[j * dx.stride] = static_cast<T>(rs * (g - mg - xhat(j) * mgx));
  }
}

// dweight = sum over the n rows of dy xhat, dbias = sum of dy, per column in row order (either
// may be null).
template <class T, class A = T, class S = T>
void layer_norm_param_grads(Strided2<const T> x, Strided2<const T> dy, Strided1<const S> mean, Strided1<const S> rstd,
                            int64_t n, int64_t c, Strided1<T> dw, Strided1<T> db) {
  for (int64_t j = 0; j < c; ++j) {
    A sw = 0, sb = 0;
    for (int64_t r = 0; r < n; ++r) {
      const A g = A(dy.at(r, j));
      sw += g * ((A(x.at(r, j)) - A(mean.data[r * mean.stride])) * A(rstd.data[r * rstd.stride]));
      sb += g;
    }
    if (dw.data) dw.data[j * dw.stride] = static_cast<T>(sw);
    if (db.data) db.data[j * db.stride] = static_cast<T>(sb);
  }
}

// One (batch, head) pair's backward. With P_ij = exp(scale q_i . k_j - lse_i) and delta_i = dy_i . y_i:
//   dv_j = sum_i P_ij dy_i, dS_ij = P_ij (dy_i . v_j - delta_i),
//   dq_i = scale sum_j dS_ij k_j, dk_j = scale sum_i dS_ij q_i;
// dk and dv accumulated in A over the queries and written once (every key row, zero where unseen).
template <class T, class A = T, class S = T>
void attention_bwd_pair(Strided2<const T> q, Strided2<const T> k, Strided2<const T> v, Strided2<const T> y,
                        Strided2<const T> dy, Strided1<const S> lse, Strided1<S> delta, Strided2<T> dq, Strided2<T> dk,
                        Strided2<T> dv, const AttentionDims& n, A scale) {
  const int64_t D = n.d;
  std::vector<A> gk(static_cast<size_t>(n.tk * D), A(0)), gv(static_cast<size_t>(n.tk * D), A(0)),
      gq(static_cast<size_t>(D));
  for (int64_t i = 0; i < n.tq; ++i) {
    A di = 0;
    for (int64_t d = 0; d < D; ++d) di += A(dy.at(i, d)) * A(y.at(i, d));
    delta.data[i * delta.stride] = static_cast<S>(di);
    const A li = A(lse.data[i * lse.stride]);
    const int64_t keys = visible_key_count(n.causal, i, n.tq, n.keys_held);
    std::fill(gq.begin(), gq.end(), A(0));
    for (int64_t j = 0; j < keys; ++j) {
      A s = 0, dp = 0;
      for (int64_t d = 0; d < D; ++d) {
        s += A(q.at(i, d)) * A(k.at(j, d));
        dp += A(dy.at(i, d)) * A(v.at(j, d));
      }
      const A p = std::exp(s * scale - li), ds = p * (dp - di);
      for (int64_t d = 0; d < D; ++d) {
        gv[j * D + d] += p * A(dy.at(i, d));
        gk[j * D + d] += scale * ds * A(q.at(i, d));
        gq[d] += scale * ds * A(k.at(j, d));
      }
    }
    for (int64_t d = 0; d < D; ++d) dq.at(i, d) = static_cast<T>(gq[d]);
  }
  for (int64_t j = 0; j < n.tk; ++j)
    for (int64_t d = 0; d < D; ++d) {
      dk.at(j, d) = static_cast<T>(gk[j * D + d]);
      dv.at(j, d) = static_cast<T>(gv[j * D + d]);
    }
}
// codegen:end

namespace detail {
// Element (b, h, t, d) of a 4-D view, as an offset.
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
  const Strided1<const T> w{a.weight.defined ? a.weight.ptr<const T>() : nullptr,
                            a.weight.defined ? a.weight.strides[0] : 0};
  const T* dy = a.dy.ptr<const T>();
  const S* mean = a.mean.ptr<const S>();
  const S* rstd = a.rstd.ptr<const S>();
  if (a.dx.defined) {
    T* dx = a.dx.ptr<T>();
    const int nt = detail::pool_threads(elementwise_work(n * c));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
    for (int64_t r = 0; r < n; ++r)
      layer_norm_bwd_row<T, A, S>(Strided1<const T>{x + r * a.x.strides[0], a.x.strides[1]}, w,
                                  Strided1<const T>{dy + r * a.dy.strides[0], a.dy.strides[1]},
                                  Strided1<T>{dx + r * a.dx.strides[0], a.dx.strides[1]}, c, mean[r * a.mean.strides[0]],
                                  rstd[r * a.rstd.strides[0]]);
    (void)nt;
  }
  if (a.dweight.defined || a.dbias.defined)
    layer_norm_param_grads<T, A, S>(Strided2<const T>{x, a.x.strides[0], a.x.strides[1]},
                                    Strided2<const T>{dy, a.dy.strides[0], a.dy.strides[1]},
                                    Strided1<const S>{mean, a.mean.strides[0]}, Strided1<const S>{rstd, a.rstd.strides[0]},
                                    n, c, Strided1<T>{a.dweight.defined ? a.dweight.ptr<T>() : nullptr,
                                                      a.dweight.defined ? a.dweight.strides[0] : 0},
                                    Strided1<T>{a.dbias.defined ? a.dbias.ptr<T>() : nullptr,
                                                a.dbias.defined ? a.dbias.strides[0] : 0});
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

template <class T, class A = T, class S = T>
void attention_bwd(const ops::AttentionBwdArgs& a) {
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], D = a.q.sizes[3], tk = a.k.sizes[2];
  const AttentionDims dims{tq, tk, detail::key_count(a, tk), D, a.causal};
  const A scale = A(a.scale);
  const int nt = detail::pool_threads(product_work(B * H * tq * tk * D * 4));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    auto pair = [&](const ops::TensorView& v, auto* data) {
      return Strided2<std::remove_pointer_t<decltype(data)>>{data + b * v.strides[0] + h * v.strides[1], v.strides[2],
                                                             v.strides[3]};
    };
    auto stat = [&](const ops::TensorView& s, auto* data) {
      return Strided1<std::remove_pointer_t<decltype(data)>>{data + b * s.strides[0] + h * s.strides[1], s.strides[2]};
    };
    attention_bwd_pair<T, A, S>(pair(a.q, a.q.ptr<const T>()), pair(a.k, a.k.ptr<const T>()),
                                pair(a.v, a.v.ptr<const T>()), pair(a.y, a.y.ptr<const T>()),
                                pair(a.dy, a.dy.ptr<const T>()), stat(a.lse, a.lse.ptr<const S>()),
                                stat(a.delta, a.delta.ptr<S>()), pair(a.dq, a.dq.ptr<T>()), pair(a.dk, a.dk.ptr<T>()),
                                pair(a.dv, a.dv.ptr<T>()), dims, scale);
  }
  (void)nt;
}

}  // namespace strata::backends::loops

// The transformer ops' members of a CPU backend class whose body is these loops; the forward
// ops and their backward first call observe(op, args) (loops::unobserved, or the backend's call observer).
#define STRATA_CPU_TRANSFORMER_MEMBERS(Backend) STRATA_CPU_TRANSFORMER_MEMBERS_OBSERVED(Backend, loops::unobserved)
#define STRATA_CPU_TRANSFORMER_MEMBERS_OBSERVED(Backend, observe)                                                   \
  void Backend::layer_norm_fwd(const ::strata::ops::LayerNormFwdArgs& a) {                                          \
    observe(::strata::ops::OpId::layer_norm_fwd, a);                                                                \
    loops::visit_float(kName, "layer_norm_fwd", a.x.dtype, [&](auto t) { loops::layer_norm_fwd<decltype(t)>(a); }); \
  }                                                                                                                 \
  void Backend::layer_norm_bwd(const ::strata::ops::LayerNormBwdArgs& a) {                                          \
    observe(::strata::ops::OpId::layer_norm_bwd, a);                                                                \
    loops::visit_float(kName, "layer_norm_bwd", a.x.dtype, [&](auto t) { loops::layer_norm_bwd<decltype(t)>(a); }); \
  }                                                                                                                 \
  void Backend::attention_fwd(const ::strata::ops::AttentionFwdArgs& a) {                                           \
    observe(::strata::ops::OpId::attention_fwd, a);                                                                 \
    loops::visit_float(kName, "attention_fwd", a.q.dtype, [&](auto t) { loops::attention_fwd<decltype(t)>(a); });   \
  }                                                                                                                 \
  void Backend::attention_bwd(const ::strata::ops::AttentionBwdArgs& a) {                                           \
    observe(::strata::ops::OpId::attention_bwd, a);                                                                 \
    loops::visit_float(kName, "attention_bwd", a.q.dtype, [&](auto t) { loops::attention_bwd<decltype(t)>(a); });   \
  }
