// conv2d on oneDNN: forward, backward data and backward weights primitives, each
// planned with format_tag::any so oneDNN picks its fastest (usually blocked)
// layouts; the plan caches the reorders between strata's strides and those.
#include "backends/onednn/context.h"
#include "backends/openblas/loops/reduce.h"

namespace strata::backends {

using namespace onednn;  // NOLINT: this backend's internal vocabulary
using dnnl::algorithm;
using dnnl::prop_kind;

namespace {

// Weights [K, C/g, R, S] as oneDNN's grouped [g, K/g, C/g, R, S] when groups > 1.
memory::desc weights_md(const TensorView& w, int groups) {
  if (groups == 1) return md_of(w);
  const int64_t kg = w.sizes[0] / groups;
  const Shape st = w.is_contiguous() ? contiguous_strides(w.sizes) : w.strides;
  return md_strided({groups, kg, w.sizes[1], w.sizes[2], w.sizes[3]}, {st[0] * kg, st[0], st[1], st[2], st[3]});
}

struct ConvGeom {
  Dims strides, dilates, pad_l, pad_r;
};
// Symmetric padding: with strata's floor output size, oneDNN's consistency check
// (src - ker + pad_l + pad_r) / stride + 1 == dst holds with pad_r = pad_l.
ConvGeom geom(const Conv2dParams& p) {
  return {{p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1}, {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}};
}

void add_params(Key& k, const Conv2dParams& p) {
  k.add(int64_t{p.stride_h}).add(int64_t{p.stride_w}).add(int64_t{p.pad_h}).add(int64_t{p.pad_w});
  k.add(int64_t{p.dilation_h}).add(int64_t{p.dilation_w}).add(int64_t{p.groups});
}

dnnl::convolution_forward::primitive_desc forward_pd(const memory::desc& src, const memory::desc& wei,
                                                     const memory::desc& bias, const memory::desc& dst,
                                                     const Conv2dParams& p, const dnnl::engine& eng) {
  const ConvGeom g = geom(p);
  dnnl::convolution_forward::desc d(prop_kind::forward_training, algorithm::convolution_direct, any_like(src),
                                    any_like(wei), bias.is_zero() ? bias : any_like(bias), any_like(dst), g.strides,
                                    g.dilates, g.pad_l, g.pad_r);
  return {d, eng};
}

struct FwdPlan : Plan {
  dnnl::convolution_forward prim;
  Staged src, wei, bias, dst;
  bool has_bias = false;
  Args args;
};

struct BwdDataPlan : Plan {
  dnnl::convolution_backward_data prim;
  Staged dy, wei, dx;
  Args args;
};

struct BwdWeightPlan : Plan {
  dnnl::convolution_backward_weights prim;
  Staged x, dy, dw;
  Args args;
};

}  // namespace

void OneDnnBackend::conv2d_fwd(const Conv2dFwdArgs& a) {
  require_f32("conv2d_fwd", a.x.dtype);
  guarded("conv2d_fwd", [&] {
    Context& c = *ctx_;
    Key key(OpId::conv2d_fwd);
    key.views(a.x, a.w, a.b, a.y);
    add_params(key, a.p);
    auto& pl = c.plan<FwdPlan>(key, [&] {
      auto p = std::make_unique<FwdPlan>();
      const memory::desc src = md_of(a.x), wei = weights_md(a.w, a.p.groups), dst = md_of(a.y);
      const memory::desc bias = a.b.defined ? md_of(a.b) : memory::desc();
      const auto pd = forward_pd(src, wei, bias, dst, a.p, c.eng);
      p->prim = dnnl::convolution_forward(pd);
      p->src = Staged::make(src, pd.src_desc(), c.eng, true);
      p->wei = Staged::make(wei, pd.weights_desc(), c.eng, true);
      p->dst = Staged::make(dst, pd.dst_desc(), c.eng, false);
      p->args = {{DNNL_ARG_SRC, p->src.arg()}, {DNNL_ARG_WEIGHTS, p->wei.arg()}, {DNNL_ARG_DST, p->dst.arg()}};
      if (a.b.defined) {
        p->has_bias = true;
        p->bias = Staged::make(bias, pd.bias_desc(), c.eng, true);
        p->args.insert({DNNL_ARG_BIAS, p->bias.arg()});
      }
      return p;
    });
    pl.src.bind(a.x.data);
    pl.wei.bind(a.w.data);
    pl.dst.bind(a.y.data);
    pl.src.pull(c.strm);
    pl.wei.pull(c.strm);
    if (pl.has_bias) {
      pl.bias.bind(a.b.data);
      pl.bias.pull(c.strm);
    }
    pl.prim.execute(c.strm, pl.args);
    pl.dst.push(c.strm);
    c.strm.wait();
  });
}

void OneDnnBackend::conv2d_bwd_data(const Conv2dBwdDataArgs& a) {
  require_f32("conv2d_bwd_data", a.dy.dtype);
  guarded("conv2d_bwd_data", [&] {
    Context& c = *ctx_;
    Key key(OpId::conv2d_bwd_data);
    key.views(a.dy, a.w, a.dx);
    add_params(key, a.p);
    auto& pl = c.plan<BwdDataPlan>(key, [&] {
      auto p = std::make_unique<BwdDataPlan>();
      const memory::desc dx = md_of(a.dx), wei = weights_md(a.w, a.p.groups), dy = md_of(a.dy);
      const auto hint = forward_pd(dx, wei, memory::desc(), dy, a.p, c.eng);
      const ConvGeom g = geom(a.p);
      dnnl::convolution_backward_data::desc d(algorithm::convolution_direct, any_like(dx), any_like(wei),
                                              any_like(dy), g.strides, g.dilates, g.pad_l, g.pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(d, c.eng, hint);
      p->prim = dnnl::convolution_backward_data(pd);
      p->dy = Staged::make(dy, pd.diff_dst_desc(), c.eng, true);
      p->wei = Staged::make(wei, pd.weights_desc(), c.eng, true);
      p->dx = Staged::make(dx, pd.diff_src_desc(), c.eng, false);
      p->args = {{DNNL_ARG_DIFF_DST, p->dy.arg()}, {DNNL_ARG_WEIGHTS, p->wei.arg()},
                 {DNNL_ARG_DIFF_SRC, p->dx.arg()}};
      return p;
    });
    pl.dy.bind(a.dy.data);
    pl.wei.bind(a.w.data);
    pl.dx.bind(a.dx.data);
    pl.dy.pull(c.strm);
    pl.wei.pull(c.strm);
    pl.prim.execute(c.strm, pl.args);
    pl.dx.push(c.strm);
    c.strm.wait();
  });
}

void OneDnnBackend::conv2d_bwd_weight(const Conv2dBwdWeightArgs& a) {
  require_f32("conv2d_bwd_weight", a.x.dtype);
  guarded("conv2d_bwd_weight", [&] {
    Context& c = *ctx_;
    Key key(OpId::conv2d_bwd_weight);
    key.views(a.x, a.dy, a.dw);
    add_params(key, a.p);
    auto& pl = c.plan<BwdWeightPlan>(key, [&] {
      auto p = std::make_unique<BwdWeightPlan>();
      const memory::desc x = md_of(a.x), dw = weights_md(a.dw, a.p.groups), dy = md_of(a.dy);
      const auto hint = forward_pd(x, dw, memory::desc(), dy, a.p, c.eng);
      const ConvGeom g = geom(a.p);
      dnnl::convolution_backward_weights::desc d(algorithm::convolution_direct, any_like(x), any_like(dw),
                                                 any_like(dy), g.strides, g.dilates, g.pad_l, g.pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(d, c.eng, hint);
      p->prim = dnnl::convolution_backward_weights(pd);
      p->x = Staged::make(x, pd.src_desc(), c.eng, true);
      p->dy = Staged::make(dy, pd.diff_dst_desc(), c.eng, true);
      p->dw = Staged::make(dw, pd.diff_weights_desc(), c.eng, false);
      p->args = {{DNNL_ARG_SRC, p->x.arg()}, {DNNL_ARG_DIFF_DST, p->dy.arg()},
                 {DNNL_ARG_DIFF_WEIGHTS, p->dw.arg()}};
      return p;
    });
    pl.x.bind(a.x.data);
    pl.dy.bind(a.dy.data);
    pl.dw.bind(a.dw.data);
    pl.x.pull(c.strm);
    pl.dy.pull(c.strm);
    pl.prim.execute(c.strm, pl.args);
    pl.dw.push(c.strm);
    c.strm.wait();
  });
}

// db[k] = sum over n, h, w of dy. oneDNN 2.6 has only a reference implementation
// for a reduction that keeps the channel dim (milliseconds for a few thousand
// elements): the shared loop does it in double.
void OneDnnBackend::conv2d_bwd_bias(const Conv2dBwdBiasArgs& a) {
  require_f32("conv2d_bwd_bias", a.dy.dtype);
  loops::conv_bias_grad<float>(a.dy, a.db);
}

}  // namespace strata::backends
