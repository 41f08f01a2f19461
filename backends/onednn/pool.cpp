// Pooling on oneDNN's pooling primitive: max, average with or without the padding
// in the divisor, and global average pooling as an average over the whole plane.
// Max-pool backward needs the forward's workspace (where each maximum was), which
// strata's op does not carry, so the plan recomputes the forward with a workspace
// into its own buffers. oneDNN keeps the first maximum of a window (it replaces on
// strictly greater, scanning rows then columns), which is op_args.h's rule.
// f32, and bf16 where the CPU has it.
#include "strata/backends/onednn/context.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using namespace onednn;  // NOLINT: this backend's internal vocabulary
using dnnl::algorithm;
using dnnl::prop_kind;

namespace {

struct Window {
  Dims strides, kernel, pad_l, pad_r;
};
// Symmetric padding (see conv.cpp: floor output sizes satisfy oneDNN's check).
Window window(const Pool2dParams& p) {
  return {{p.stride_h, p.stride_w}, {p.kernel_h, p.kernel_w}, {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}};
}
// The whole plane: global average pooling.
Window plane(const TensorView& x) { return {{1, 1}, {x.sizes[2], x.sizes[3]}, {0, 0}, {0, 0}}; }

algorithm avg_alg(const Pool2dParams& p) {
  return p.count_include_pad ? algorithm::pooling_avg_include_padding : algorithm::pooling_avg_exclude_padding;
}

void add_params(Key& k, const Pool2dParams& p) {
  k.add(int64_t{p.kernel_h}).add(int64_t{p.kernel_w}).add(int64_t{p.stride_h}).add(int64_t{p.stride_w});
  k.add(int64_t{p.pad_h}).add(int64_t{p.pad_w}).add(static_cast<int64_t>(p.count_include_pad));
}

// Global pooling's output [N,C] as [N,C,1,1] (descriptor_rules.h).
memory::desc md_nc11(const TensorView& v, const TensorView& plane) {
  const DescLayout l = nc11_layout(v, plane);
  return memory::desc(l.dims, dnnl_dt(v.dtype), l.strides);
}

dnnl::pooling_forward::primitive_desc fwd_pd(prop_kind prop, algorithm alg, const memory::desc& src,
                                             const memory::desc& dst, const Window& w, const dnnl::engine& eng) {
  return {{prop, alg, src, dst, w.strides, w.kernel, w.pad_l, w.pad_r}, eng};
}

struct FwdPlan : Plan {
  dnnl::pooling_forward prim;
  Staged x, y;
  Args args;
};

struct BwdPlan : Plan {
  dnnl::pooling_forward fwd;  // max only: recomputes the workspace
  dnnl::pooling_backward prim;
  Staged x, dy, dx;
  memory y_scratch, workspace;
  bool max = false;
  Args fwd_args, args;
};

void forward(Context& c, Key& key, algorithm alg, const TensorView& x, const TensorView& y,
             const memory::desc& ymd, const Window& w) {
  auto& pl = c.plan<FwdPlan>(key, [&] {
    const memory::desc xmd = md_of(x);
    const auto pd = fwd_pd(prop_kind::forward_inference, alg, xmd, ymd, w, c.eng);
    auto p = std::make_unique<FwdPlan>();
    p->prim = dnnl::pooling_forward(pd);
    p->x = Staged::make(xmd, pd.src_desc(), c.eng, true);
    p->y = Staged::make(ymd, pd.dst_desc(), c.eng, false);
    p->args = {{DNNL_ARG_SRC, p->x.arg()}, {DNNL_ARG_DST, p->y.arg()}};
    return p;
  });
  pl.x.bind(x.data);
  pl.y.bind(y.data);
  pl.x.pull(c.strm);
  pl.prim.execute(c.strm, pl.args);
  pl.y.push(c.strm);
  c.strm.wait();
}

// dx from dy; for max pooling `x` (the forward input) rebuilds the workspace.
void backward(Context& c, Key& key, algorithm alg, const TensorView* x, const TensorView& dy,
              const memory::desc& dymd, const TensorView& dx, const Window& w) {
  const bool max = alg == algorithm::pooling_max;
  auto& pl = c.plan<BwdPlan>(key, [&] {
    const memory::desc dxmd = md_of(dx);
    auto p = std::make_unique<BwdPlan>();
    p->max = max;
    const auto hint = fwd_pd(prop_kind::forward_training, alg, max ? md_of(*x) : dxmd, dymd, w, c.eng);
    const dnnl::pooling_backward::desc d(alg, dxmd, dymd, w.strides, w.kernel, w.pad_l, w.pad_r);
    const dnnl::pooling_backward::primitive_desc pd(d, c.eng, hint);
    p->prim = dnnl::pooling_backward(pd);
    p->dy = Staged::make(dymd, pd.diff_dst_desc(), c.eng, true);
    p->dx = Staged::make(dxmd, pd.diff_src_desc(), c.eng, false);
    p->args = {{DNNL_ARG_DIFF_DST, p->dy.arg()}, {DNNL_ARG_DIFF_SRC, p->dx.arg()}};
    if (max) {
      p->fwd = dnnl::pooling_forward(hint);
      p->x = Staged::make(md_of(*x), hint.src_desc(), c.eng, true);
      p->y_scratch = memory(hint.dst_desc(), c.eng);
      p->workspace = memory(hint.workspace_desc(), c.eng);
      p->fwd_args = {{DNNL_ARG_SRC, p->x.arg()}, {DNNL_ARG_DST, p->y_scratch}, {DNNL_ARG_WORKSPACE, p->workspace}};
      p->args.insert({DNNL_ARG_WORKSPACE, p->workspace});
    }
    return p;
  });
  if (pl.max) {
    pl.x.bind(x->data);
    pl.x.pull(c.strm);
    pl.fwd.execute(c.strm, pl.fwd_args);
  }
  pl.dy.bind(dy.data);
  pl.dx.bind(dx.data);
  pl.dy.pull(c.strm);
  pl.prim.execute(c.strm, pl.args);
  pl.dx.push(c.strm);
  c.strm.wait();
}

}  // namespace

void OneDnnBackend::max_pool2d_fwd(const MaxPool2dFwdArgs& a) {
  observe_call(OpId::max_pool2d_fwd, a);
  require_f32_or_bf16("max_pool2d_fwd", a.x.dtype);
  guarded("max_pool2d_fwd", loops::elementwise_work(a.x.numel()), [&] {
    Key key(OpId::max_pool2d_fwd);
    key.views(a.x, a.y);
    add_params(key, a.p);
    forward(*ctx_, key, algorithm::pooling_max, a.x, a.y, md_of(a.y), window(a.p));
  });
}

void OneDnnBackend::max_pool2d_bwd(const MaxPool2dBwdArgs& a) {
  observe_call(OpId::max_pool2d_bwd, a);
  require_f32_or_bf16("max_pool2d_bwd", a.x.dtype);
  guarded("max_pool2d_bwd", loops::elementwise_work(a.x.numel()), [&] {
    Key key(OpId::max_pool2d_bwd);
    key.views(a.x, a.dy, a.dx);
    add_params(key, a.p);
    backward(*ctx_, key, algorithm::pooling_max, &a.x, a.dy, md_of(a.dy), a.dx, window(a.p));
  });
}

void OneDnnBackend::avg_pool2d_fwd(const AvgPool2dFwdArgs& a) {
  observe_call(OpId::avg_pool2d_fwd, a);
  require_f32_or_bf16("avg_pool2d_fwd", a.x.dtype);
  guarded("avg_pool2d_fwd", loops::elementwise_work(a.x.numel()), [&] {
    Key key(OpId::avg_pool2d_fwd);
    key.views(a.x, a.y);
    add_params(key, a.p);
    forward(*ctx_, key, avg_alg(a.p), a.x, a.y, md_of(a.y), window(a.p));
  });
}

void OneDnnBackend::avg_pool2d_bwd(const AvgPool2dBwdArgs& a) {
  require_f32_or_bf16("avg_pool2d_bwd", a.dy.dtype);
  guarded("avg_pool2d_bwd", loops::elementwise_work(a.dx.numel()), [&] {
    Key key(OpId::avg_pool2d_bwd);
    key.views(a.dy, a.dx);
    add_params(key, a.p);
    backward(*ctx_, key, avg_alg(a.p), nullptr, a.dy, md_of(a.dy), a.dx, window(a.p));
  });
}

void OneDnnBackend::global_avg_pool_fwd(const GlobalAvgPoolFwdArgs& a) {
  observe_call(OpId::global_avg_pool_fwd, a);
  require_f32_or_bf16("global_avg_pool_fwd", a.x.dtype);
  guarded("global_avg_pool_fwd", loops::elementwise_work(a.x.numel()), [&] {
    Key key(OpId::global_avg_pool_fwd);
    key.views(a.x, a.y);
    forward(*ctx_, key, algorithm::pooling_avg_include_padding, a.x, a.y, md_nc11(a.y, a.x), plane(a.x));
  });
}

void OneDnnBackend::global_avg_pool_bwd(const GlobalAvgPoolBwdArgs& a) {
  observe_call(OpId::global_avg_pool_bwd, a);
  require_f32_or_bf16("global_avg_pool_bwd", a.dy.dtype);
  guarded("global_avg_pool_bwd", loops::elementwise_work(a.dx.numel()), [&] {
    Key key(OpId::global_avg_pool_bwd);
    key.views(a.dy, a.dx);
    backward(*ctx_, key, algorithm::pooling_avg_include_padding, nullptr, a.dy, md_nc11(a.dy, a.dx), a.dx,
             plane(a.dx));
  });
}

}  // namespace strata::backends
