#include "strata/backends/cuda/attention_cudnn.h"

#include <algorithm>
#include <deque>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#include "strata/backends/cuda/cudnn_util.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types

namespace {

// The graph is the one cudnn-frontend builds for its "composite" SDPA node: matmul ->
// scale -> causal mask (gen_index, compare, binary_select) -> softmax with its statistics
// -> matmul, and for the backward its dP/dS chain. cuDNN 9 also declares a single
// OPERATION_SDPA_FWD/BWD node, but the frontend (v1.x) takes it only from cuDNN 9.13.1 and,
// for a causal mask (a diagonal band bound) only from 9.21; it has no backward node below
// that either. So on the cuDNN 9.19 we run, the frontend itself lowers to this pattern, and
// it is the one the fused flash-attention engines are known to match.

enum : int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
  kUidScale,
  kUidNegInf,
  kUidOne,
  kUidSoftmaxSum,  // backward: rowsum(dO * O), an f32 buffer of ours (the workspace's tail)
  kUidDQAccum,     // backward, nondeterministic form: dq accumulated in f32 before rounding
  kUidVirtual = 100,
};

using Dims = int64_t[4];

void dense(const Dims& d, Dims& st) {
  st[3] = 1;
  for (int i = 2; i >= 0; --i) st[i] = st[i + 1] * d[i + 1];
}

// The view's dims and strides in the order `perm` takes them (cuDNN's graph wants K and V
// transposed, [B, H, D, T], by their strides alone); a size-1 dim's zero stride as 1, which
// cuDNN rejects and which addresses nothing anyway.
void dims_of(const TensorView& v, std::initializer_list<int> perm, Dims& d, Dims& st) {
  int i = 0;
  for (int p : perm) {
    d[i] = p < v.dim() ? v.sizes[p] : 1;
    st[i] = p < v.dim() ? v.strides[p] : 1;
    if (d[i] == 1 && st[i] == 0) st[i] = 1;
    ++i;
  }
}

// Descriptors of one graph, kept alive (at stable addresses) as long as its plan.
struct Builder {
  std::deque<GraphDesc> keep;
  std::vector<cudnnBackendDescriptor_t> ops;
  int64_t next_virtual = kUidVirtual;

  const GraphDesc& hold(GraphDesc d) {
    keep.push_back(std::move(d));
    return keep.back();
  }
  const GraphDesc& io(const TensorView& v, std::initializer_list<int> perm, int64_t uid, cudnnDataType_t dt) {
    Dims d, st;
    dims_of(v, perm, d, st);
    return hold(graph_tensor(dt, d, st, uid, byte_alignment(v.data)));
  }
  const GraphDesc& io(const TensorView& v, std::initializer_list<int> perm, int64_t uid) {
    return io(v, perm, uid, cudnn_dtype(v.dtype, "attention"));
  }
  // An f32 buffer of ours, dense, at a 256-byte aligned offset of the workspace.
  const GraphDesc& buffer(const Dims& d, int64_t uid) {
    Dims st;
    dense(d, st);
    return hold(graph_tensor(CUDNN_DATA_FLOAT, d, st, uid, 16));
  }
  const GraphDesc& scalar(int64_t uid) {
    const Dims one{1, 1, 1, 1};
    return hold(graph_tensor(CUDNN_DATA_FLOAT, one, one, uid, 16, false, true));
  }
  const GraphDesc& virt(const Dims& d, cudnnDataType_t dt = CUDNN_DATA_FLOAT) {
    Dims st;
    dense(d, st);
    return hold(graph_tensor(dt, d, st, next_virtual++, 16, true));
  }
  // The same tensor read with dims 2 and 3 swapped (a transpose by strides).
  const GraphDesc& virt_t(const Dims& d, cudnnDataType_t dt) {
    const Dims dt_dims{d[0], d[1], d[3], d[2]};
    Dims st;
    dense(d, st);
    const Dims tst{st[0], st[1], st[3], st[2]};
    return hold(graph_tensor(dt, dt_dims, tst, next_virtual++, 16, true));
  }
  void op(GraphDesc d) {
    d.finalize();
    ops.push_back(hold(std::move(d)).get());
  }

  void pointwise(cudnnPointwiseMode_t mode, const GraphDesc& x, const GraphDesc* b, const GraphDesc* t,
                 const GraphDesc& y, cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    ops.push_back(hold(pointwise_node(hold(pointwise_mode(mode, prec, axis)), x, b, t, y)).get());
  }
  // mode(x[, b]) into a new f32 intermediate of dims d.
  const GraphDesc& apply(cudnnPointwiseMode_t mode, const GraphDesc& x, const GraphDesc* b, const Dims& d) {
    const GraphDesc& y = virt(d);
    pointwise(mode, x, b, nullptr, y);
    return y;
  }
  // An operation whose one mode descriptor (matmul, reduction) is set under `desc_attr`.
  void with_desc(cudnnBackendDescriptorType_t type, GraphDesc mode, cudnnBackendAttributeName_t desc_attr,
                 std::initializer_list<std::pair<cudnnBackendAttributeName_t, const GraphDesc*>> tensors) {
    mode.finalize();
    GraphDesc o(type);
    for (const auto& [attr, t] : tensors) o.set_desc(attr, *t);
    o.set_desc(desc_attr, hold(std::move(mode)));
    op(std::move(o));
  }
  void matmul(const GraphDesc& a, const GraphDesc& b, const GraphDesc& c) {
    GraphDesc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    with_desc(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, std::move(mm), CUDNN_ATTR_OPERATION_MATMUL_DESC,
              {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, &a},
               {CUDNN_ATTR_OPERATION_MATMUL_BDESC, &b},
               {CUDNN_ATTR_OPERATION_MATMUL_CDESC, &c}});
  }
  void reduce(cudnnReduceTensorOp_t how, const GraphDesc& x, const GraphDesc& y) {
    GraphDesc r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    with_desc(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, std::move(r), CUDNN_ATTR_OPERATION_REDUCTION_DESC,
              {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, &x}, {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, &y}});
  }
  void reshape(const GraphDesc& x, const GraphDesc& y) {
    GraphDesc o(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    o.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    op(std::move(o));
  }

  // s masked to the keys j <= i: cuDNN's top-left causal mask, as the frontend lowers it.
  const GraphDesc& causal(const GraphDesc& s, const Dims& d, const GraphDesc& neg_inf) {
    const GraphDesc& row = virt(d, CUDNN_DATA_INT32);
    const GraphDesc& col = virt(d, CUDNN_DATA_INT32);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3);
    const GraphDesc& keep_it = virt(d, CUDNN_DATA_BOOLEAN);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, nullptr, keep_it, CUDNN_DATA_BOOLEAN);
    const GraphDesc& out = virt(d);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, &neg_inf, &keep_it, out);
    return out;
  }

  // Finalizes the graph and its first acceptable plan into `p` (or the reason there is none).
  template <class P>
  void plan(Context& ctx, P& p, const Settings& s, int64_t extra_ws, const char* op_name) {
    GraphDesc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()),
              ops.data())
        .set(kGraphHandle, CUDNN_TYPE_HANDLE, 1, &ctx.cudnn);
    graph.finalize();
    const size_t budget = s.max_workspace_bytes > static_cast<size_t>(extra_ws)
                              ? s.max_workspace_bytes - static_cast<size_t>(extra_ws)
                              : 0;
    // Every engine config is acceptable: the fused attention engines compile their kernels
    // at run time on some versions (NVRTC), which graph_conv refuses for convolutions
    // because a legacy path exists; here the alternative is strata's far slower kernels.
    // The first call of a key pays it once; the plan is cached.
    std::string tried;
    std::vector<GraphCandidate> found =
        graph_candidates(ctx, graph, 1, budget, [](cudnnBackendDescriptor_t) { return std::string(); }, tried);
    if (found.empty()) {
      p.unusable = std::string(op_name) + ": cuDNN offers no fused plan (" +
                   (tried.empty() ? std::string("none offered") : tried) + ")";
      return;
    }
    p.ws = found[0].ws;
    p.plan = found[0].plan.get();
    keep.push_back(std::move(graph));
    keep.push_back(std::move(found[0].cfg));
    keep.push_back(std::move(found[0].plan));
  }
};

struct AttnPlan : Plan {
  Builder b;
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t ws = 0;  // cuDNN's own workspace; the backward's buffers follow it
  std::string unusable;
};

constexpr int64_t kAlign = 256;
int64_t round_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Why the fused engines do not take these operands ("" if they may).
std::string unsupported(const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& lse, const TensorView& kv_len, bool causal) {
  const auto no = [&](const std::string& why) { return std::string(op) + ": " + why; };
  if (q.dtype != DType::f16 && q.dtype != DType::bf16) return no("cuDNN's fused attention is for f16/bf16");
  if (lse.dtype != DType::f32) return no("statistics not in f32");
  if (kv_len.defined) return no("kv_len (the decode path) runs strata's kernels");
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return no("expected rank-4 q, k, v");
  const int64_t D = q.sizes[3], tq = q.sizes[2], tk = k.sizes[2];
  // Operands that disagree are left to the kernels' checks, which name the mismatch.
  if (k.sizes[0] != q.sizes[0] || k.sizes[1] != q.sizes[1] || k.sizes[3] != D || v.sizes[0] != k.sizes[0] ||
      v.sizes[1] != k.sizes[1] || v.sizes[2] != tk)
    return no("q, k, v sizes disagree");
  if (D % 8 != 0 || D > 128 || v.sizes[3] != D) return no("head dim not a multiple of 8 up to 128");
  if (causal && tq != tk) return no("a causal mask with Tq != Tk (cuDNN's mask is top-left aligned)");
  if (q.sizes[0] * q.sizes[1] * tq * tk == 0) return no("empty");
  return {};
}

void add_view(PlanKey& key, const TensorView& v) {
  for (int i = 0; i < v.dim(); ++i) key.add(v.strides[i]);
  key.add(byte_alignment(v.data));
}

// Builds with `make` into a plan of key; a graph cuDNN does not take at all (a descriptor
// that does not finalize) is remembered as unusable like one without an engine.
template <class Make>
AttnPlan& cached(Context& ctx, const PlanKey& key, const char* op, Make&& make) {
  return ctx.plan<AttnPlan>(key, [&] {
    auto p = std::make_unique<AttnPlan>();
    try {
      make(*p);
    } catch (const strata::Error& err) {
      p = std::make_unique<AttnPlan>();
      p->unusable = std::string(op) + ": cuDNN refused the fused graph: " + err.what();
    }
    return p;
  });
}

void run(Context& ctx, const AttnPlan& p, void* ws, std::vector<void*>& ptrs, std::vector<int64_t>& uids,
         const char* op) {
  try {
    execute_graph(ctx, p.plan, ws, static_cast<int64_t>(ptrs.size()), ptrs.data(), uids.data());
  } catch (const strata::Error& err) {
    STRATA_FAIL(op, ": cuDNN fused attention: ", err.what());
  }
}

}  // namespace

std::string cudnn_attention_fwd(Context& ctx, const AttentionFwdArgs& a, const Settings& s) {
  constexpr const char* kOp = "attention_fwd";
  if (std::string why = unsupported(kOp, a.q, a.k, a.v, a.lse, a.kv_len, a.causal); !why.empty()) return why;
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], tk = a.k.sizes[2], D = a.q.sizes[3];
  PlanKey key;
  key.add(4000).add(static_cast<int64_t>(a.q.dtype)).add(B).add(H).add(tq).add(tk).add(D).add(a.causal);
  for (const TensorView* v : {&a.q, &a.k, &a.v, &a.y, &a.lse}) add_view(key, *v);
  key.add(static_cast<int64_t>(s.max_workspace_bytes));
  AttnPlan& p = cached(ctx, key, kOp, [&](AttnPlan& plan) {
    Builder& b = plan.b;
    const GraphDesc& q = b.io(a.q, {0, 1, 2, 3}, kUidQ);
    const GraphDesc& kt = b.io(a.k, {0, 1, 3, 2}, kUidK);
    const GraphDesc& v = b.io(a.v, {0, 1, 2, 3}, kUidV);
    const GraphDesc& o = b.io(a.y, {0, 1, 2, 3}, kUidO);
    const GraphDesc& stats = b.io(a.lse, {0, 1, 2, 3}, kUidStats, CUDNN_DATA_FLOAT);
    const GraphDesc& scale = b.scalar(kUidScale);
    const GraphDesc& neg_inf = b.scalar(kUidNegInf);
    const Dims sd{B, H, tq, tk}, rd{B, H, tq, 1};
    const GraphDesc& s0 = b.virt(sd);
    b.matmul(q, kt, s0);
    const GraphDesc& s1 = b.apply(CUDNN_POINTWISE_MUL, s0, &scale, sd);
    const GraphDesc& sm = a.causal ? b.causal(s1, sd, neg_inf) : s1;
    // Softmax with its statistics: lse = max + log(sum exp(s - max)), p = exp(s - max) / sum.
    const GraphDesc& mx = b.virt(rd);
    b.reduce(CUDNN_REDUCE_TENSOR_MAX, sm, mx);
    const GraphDesc& z = b.apply(CUDNN_POINTWISE_SUB, sm, &mx, sd);
    const GraphDesc& e = b.apply(CUDNN_POINTWISE_EXP, z, nullptr, sd);
    const GraphDesc& sum = b.virt(rd);
    b.reduce(CUDNN_REDUCE_TENSOR_ADD, e, sum);
    const GraphDesc& log_sum = b.apply(CUDNN_POINTWISE_LOG, sum, nullptr, rd);
    b.pointwise(CUDNN_POINTWISE_ADD, mx, &log_sum, nullptr, stats);
    // The probabilities enter the second matmul in the inputs' dtype, as the engines expect.
    const GraphDesc& prob = b.virt(sd, cudnn_dtype(a.q.dtype, kOp));
    b.pointwise(CUDNN_POINTWISE_DIV, e, &sum, nullptr, prob);
    b.matmul(prob, v, o);
    b.plan(ctx, plan, s, 0, kOp);
  });
  if (!p.unusable.empty()) return p.unusable;
  float scale = static_cast<float>(a.scale), neg_inf = -std::numeric_limits<float>::infinity();
  // The pack names exactly the graph's tensors: -inf only where the causal mask uses it.
  std::vector<void*> ptrs{a.q.data, a.k.data, a.v.data, a.y.data, a.lse.data, &scale};
  std::vector<int64_t> uids{kUidQ, kUidK, kUidV, kUidO, kUidStats, kUidScale};
  if (a.causal) {
    ptrs.push_back(&neg_inf);
    uids.push_back(kUidNegInf);
  }
  // Never a null workspace, even for a plan that asks for none.
  void* ws = ctx.workspace(static_cast<size_t>(std::max<int64_t>(p.ws, kAlign)));
  run(ctx, p, ws, ptrs, uids, kOp);
  ++ctx.fused_attentions;
  return {};
}

std::string cudnn_attention_bwd(Context& ctx, const AttentionBwdArgs& a, const Settings& s) {
  constexpr const char* kOp = "attention_bwd";
  if (std::string why = unsupported(kOp, a.q, a.k, a.v, a.lse, a.kv_len, a.causal); !why.empty()) return why;
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], tk = a.k.sizes[2], D = a.q.sizes[3];
  const bool det = s.deterministic;
  PlanKey key;
  key.add(4001).add(static_cast<int64_t>(a.q.dtype)).add(B).add(H).add(tq).add(tk).add(D).add(a.causal).add(det);
  for (const TensorView* v : {&a.q, &a.k, &a.v, &a.y, &a.lse, &a.dy, &a.dq, &a.dk, &a.dv}) add_view(key, *v);
  key.add(static_cast<int64_t>(s.max_workspace_bytes));
  const int64_t sum_bytes = round_up(B * H * tq * static_cast<int64_t>(sizeof(float)));
  const int64_t accum_bytes = det ? 0 : round_up(B * H * tq * D * static_cast<int64_t>(sizeof(float)));
  AttnPlan& p = cached(ctx, key, kOp, [&](AttnPlan& plan) {
    Builder& b = plan.b;
    const cudnnDataType_t io = cudnn_dtype(a.q.dtype, kOp);
    const GraphDesc& q = b.io(a.q, {0, 1, 2, 3}, kUidQ);
    const GraphDesc& kt = b.io(a.k, {0, 1, 3, 2}, kUidK);
    const GraphDesc& vt = b.io(a.v, {0, 1, 3, 2}, kUidV);
    const GraphDesc& o = b.io(a.y, {0, 1, 2, 3}, kUidO);
    const GraphDesc& d_o = b.io(a.dy, {0, 1, 2, 3}, kUidDO);
    const GraphDesc& stats = b.io(a.lse, {0, 1, 2, 3}, kUidStats, CUDNN_DATA_FLOAT);
    const GraphDesc& dq = b.io(a.dq, {0, 1, 2, 3}, kUidDQ);
    const GraphDesc& dk = b.io(a.dk, {0, 1, 2, 3}, kUidDK);
    const GraphDesc& dv = b.io(a.dv, {0, 1, 2, 3}, kUidDV);
    const GraphDesc& scale = b.scalar(kUidScale);
    const GraphDesc& neg_inf = b.scalar(kUidNegInf);
    const GraphDesc& one = b.scalar(kUidOne);
    const Dims sd{B, H, tq, tk}, rd{B, H, tq, 1}, qd{B, H, tq, D};

    // delta = rowsum(dO * O), written to our f32 buffer (the engine reads it per tile).
    const GraphDesc& doo = b.apply(CUDNN_POINTWISE_MUL, d_o, &o, qd);
    const GraphDesc& rowsum = b.virt(rd);
    b.reduce(CUDNN_REDUCE_TENSOR_ADD, doo, rowsum);
    const GraphDesc& delta = b.buffer(rd, kUidSoftmaxSum);
    b.pointwise(CUDNN_POINTWISE_MUL, rowsum, &one, nullptr, delta);

    // p = exp(scale * q k^T - lse), masked.
    const GraphDesc& s0 = b.virt(sd);
    b.matmul(q, kt, s0);
    const GraphDesc& s1 = b.apply(CUDNN_POINTWISE_MUL, s0, &scale, sd);
    const GraphDesc& s2 = b.apply(CUDNN_POINTWISE_SUB, s1, &stats, sd);
    const GraphDesc& s3 = a.causal ? b.causal(s2, sd, neg_inf) : s2;
    const GraphDesc& prob = b.apply(CUDNN_POINTWISE_EXP, s3, nullptr, sd);

    // dV = p^T dO.
    const GraphDesc& prob_t = b.virt_t(sd, io);
    b.reshape(prob, prob_t);
    b.matmul(prob_t, d_o, dv);

    // dS = scale * p * (dO V^T - delta).
    const GraphDesc& dp0 = b.virt(sd);
    b.matmul(d_o, vt, dp0);
    const GraphDesc& dp1 = b.apply(CUDNN_POINTWISE_SUB, dp0, &delta, sd);
    const GraphDesc& ds0 = b.apply(CUDNN_POINTWISE_MUL, dp1, &prob, sd);
    const GraphDesc& ds = b.apply(CUDNN_POINTWISE_MUL, ds0, &scale, sd);

    // dK = dS^T Q.
    const GraphDesc& ds_t = b.virt_t(sd, io);
    b.reshape(ds, ds_t);
    b.matmul(ds_t, q, dk);

    // dQ = dS K, with K read back from K^T by strides.
    Dims kdims, kst;
    dims_of(a.k, {0, 1, 2, 3}, kdims, kst);
    const GraphDesc& k = b.hold(graph_tensor(io, kdims, kst, b.next_virtual++, 16, true));
    b.reshape(kt, k);
    if (det) {
      b.matmul(ds, k, dq);
    } else {
      const GraphDesc& accum = b.buffer(qd, kUidDQAccum);
      b.matmul(ds, k, accum);
      b.pointwise(CUDNN_POINTWISE_IDENTITY, accum, nullptr, nullptr, dq);
    }
    b.plan(ctx, plan, s, sum_bytes + accum_bytes, kOp);
  });
  if (!p.unusable.empty()) return p.unusable;
  const int64_t own = round_up(std::max<int64_t>(p.ws, 1));
  char* ws = static_cast<char*>(ctx.workspace(static_cast<size_t>(own + sum_bytes + accum_bytes)));
  float scale = static_cast<float>(a.scale), neg_inf = -std::numeric_limits<float>::infinity(), one = 1.f;
  std::vector<void*> ptrs{a.q.data, a.k.data, a.v.data, a.y.data, a.dy.data, a.lse.data, a.dq.data,
                          a.dk.data, a.dv.data, &scale,   &one,     ws + own};
  std::vector<int64_t> uids{kUidQ,  kUidK,  kUidV,     kUidO,   kUidDO,        kUidStats, kUidDQ,
                            kUidDK, kUidDV, kUidScale, kUidOne, kUidSoftmaxSum};
  if (a.causal) {
    ptrs.push_back(&neg_inf);
    uids.push_back(kUidNegInf);
  }
  if (!det) {
    ptrs.push_back(ws + own + sum_bytes);
    uids.push_back(kUidDQAccum);
  }
  run(ctx, p, ws, ptrs, uids, kOp);
  ++ctx.fused_attentions;
  return {};
}

}  // namespace strata::backends::cuda
