// conv2d on oneDNN: forward, backward data and backward weights primitives, each
// planned with format_tag::any so oneDNN picks its fastest (usually blocked)
// layouts; the plan caches the reorders between strata's strides and those, and keeps
// versioned weights (Conv2dFwdArgs::w_version: folded inference) in its layout, where
// Conv2dParams::winograd lets a 3x3 stride-1 one run oneDNN's Winograd kernels.
// f32, and bf16 where the CPU has it (f32 accumulation inside oneDNN).
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <unordered_map>

#include "strata/backends/onednn/context.h"
#include "strata/backends/cpu/reduce.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using namespace onednn;  // NOLINT: this backend's internal vocabulary
using dnnl::algorithm;
using dnnl::prop_kind;

namespace {

// Weights [K, C/g, R, S] as oneDNN's grouped [g, K/g, C/g, R, S] when groups > 1.
memory::desc weights_md(const TensorView& w, int groups) {
  if (groups == 1) return md_of(w);
  const int64_t kg = w.sizes[0] / groups;
  const Shape st = w.is_contiguous() ? contiguous_strides(w.sizes) : w.strides;
  return md_strided({groups, kg, w.sizes[1], w.sizes[2], w.sizes[3]}, {st[0] * kg, st[0], st[1], st[2], st[3]},
                    dnnl_dt(w.dtype));
}

struct ConvGeom {
  Dims strides, dilates, pad_l, pad_r;
};
// Symmetric padding: with strata's floor output size, oneDNN's consistency check
// (src - ker + pad_l + pad_r) / stride + 1 == dst holds with pad_r = pad_l.
ConvGeom geom(const Conv2dParams& p) {
  return {{p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1}, {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}};
}

// A direction's cache key: the op, its views and the convolution's parameters.
template <class... V>
Key conv_key(OpId op, const Conv2dParams& p, const V&... views) {
  Key k(op);
  k.views(views...);
  k.add(int64_t{p.stride_h}).add(int64_t{p.stride_w}).add(int64_t{p.pad_h}).add(int64_t{p.pad_w});
  k.add(int64_t{p.dilation_h}).add(int64_t{p.dilation_w}).add(int64_t{p.groups});
  return k;
}

// A staged operand of a planned primitive and the call's pointer for it.
struct Operand {
  Staged& staged;
  const void* data;
};
// One run of a planned primitive: the call's pointers bound, the inputs reordered into
// the primitive's layouts, the primitive executed and, with push_output, its output
// reordered back; then the stream waits.
void run_planned(Context& c, const dnnl::primitive& prim, const Args& args, std::initializer_list<Operand> inputs,
                 const Operand& output, bool push_output = true) {
  for (const Operand& in : inputs) in.staged.bind(in.data);
  output.staged.bind(output.data);
  for (const Operand& in : inputs) in.staged.pull(c.strm);
  prim.execute(c.strm, args);
  if (push_output) output.staged.push(c.strm);
  c.strm.wait();
}

dnnl::convolution_forward::primitive_desc forward_pd(const memory::desc& src, const memory::desc& wei,
                                                     const memory::desc& bias, const memory::desc& dst,
                                                     const Conv2dParams& p, const dnnl::engine& eng,
                                                     const dnnl::primitive_attr& attr = {},
                                                     prop_kind prop = prop_kind::forward_training,
                                                     algorithm alg = algorithm::convolution_direct) {
  const ConvGeom g = geom(p);
  dnnl::convolution_forward::desc d(prop, alg, any_like(src),
                                    any_like(wei), bias.is_zero() ? bias : any_like(bias), any_like(dst), g.strides,
                                    g.dilates, g.pad_l, g.pad_r);
  return {d, attr, eng};
}

// The inference epilogue (op_args.h) as post-ops of the convolution primitive, so the
// residual add and ReLU happen on the accumulators before they are written: a sum
// post-op for z (oneDNN's own residual fusion: dst += z, so z is first reordered into
// the primitive's dst, which also covers a z in another layout than y) and eltwise_relu.
// sum is oneDNN's own form of the residual fusion (its ResNet examples use it); a
// binary_add post-op with z as a second source was not tried.
dnnl::primitive_attr epilogue_attr(const Conv2dFwdArgs& a) {
  dnnl::post_ops po;
  if (a.z.defined) po.append_sum(1.f);
  if (a.relu) po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

// Weights the primitive re-lays out, kept in its layout per weight buffer while their
// version (Conv2dFwdArgs::w_version) holds: batch-1 inference re-laid every 3x3 weight out
// at each call otherwise (docs/tuning.md).
struct KeptWeights {
  uint64_t version = 0;
  memory laid_out;
};
// More weight buffers than this seen by one plan: it starts over (addresses of freed
// models' weights would otherwise pile up).
constexpr size_t kKeptWeightsMax = 256;

struct FwdPlan : Plan {
  dnnl::convolution_forward prim;
  Staged src, wei, bias, dst;
  std::unordered_map<const void*, KeptWeights> kept;
  memory::desc wei_want;  // the primitive's weight layout, the kept copies'
  // oneDNN 2.6 reorders into its Winograd weight layout from plain [K, C, R, S] only: other
  // weights go there through a plain copy (wei's inner) and this second reorder.
  bool wei_via_plain = false;
  dnnl::reorder plain_to_want;
  bool has_bias = false;
  Args args;
  // With a residual: z (strata's layout) reordered into the dst the sum post-op reads.
  memory z;
  dnnl::reorder z_into_dst;
  bool has_z = false;
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
  int64_t unblock_o = 0, unblock_i = 0;  // > 0: dw leaves through unblock_1x1, not the reorder
};

// The weight gradient leaves oneDNN's blocked ABcd16b16a ([O/16][I/16][16i][16o]) through
// unblock_1x1, not its reorder (descriptor_rules.h: unblock_1x1_shape).
bool unblock_1x1_applies(const memory::desc& user, const memory::desc& blocked, const TensorView& w, int groups) {
  if (!unblock_1x1_shape(w, groups)) return false;
  const Dims dims{w.sizes[0], w.sizes[1], 1, 1};
  return user == memory::desc(dims, memory::data_type::f32, memory::format_tag::abcd) &&
         blocked == memory::desc(dims, memory::data_type::f32, memory::format_tag::ABcd16b16a);
}

// x's pixels a 1x1 stride-s convolution without padding reads, as an [N, C, OH, OW] view
// (descriptor_rules.h); none where oneDNN refuses the view.
std::optional<memory::desc> every_strided_pixel(const TensorView& x, const TensorView& y, const Conv2dParams& p) {
  const DescLayout l = strided_pixels_layout(x, y, p);
  try {
    return memory::desc(l.dims, dnnl_dt(x.dtype), l.strides);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// oneDNN 2.6's jit_bf16 backward-weights kernel is far slower than its GEMM-based one on
// small output planes at two threads, and faster on large ones (docs/tuning.md).
constexpr int64_t kBf16GemmBelow = 256;

// The code between "codegen:begin" and "codegen:end" is also written, as it is, into the
// training steps codegen/ generates.
// codegen:begin train_loops
// oneDNN's blocked ABcd16b16a 1x1 weights [O/16][I/16][16i][16o] to plain [O][I]: its 16x16 block
// transpose, split over OpenMP threads by output-channel blocks.
inline void unblock_1x1(const float* src, float* dst, int64_t o, int64_t i) {
  const int64_t ob_count = o / 16, ib_count = i / 16;
#pragma omp parallel for schedule(static) if (o * i >= kParallelAbove)
  for (int64_t ob = 0; ob < ob_count; ++ob)
    for (int64_t ib = 0; ib < ib_count; ++ib) {
      const float* tile = src + (ob * ib_count + ib) * 256;
      for (int64_t r = 0; r < 16; ++r) {
        float* row = dst + (ob * 16 + r) * i + ib * 16;
        for (int64_t c = 0; c < 16; ++c) row[c] = tile[c * 16 + r];
      }
    }
}
// codegen:end

}  // namespace

void OneDnnBackend::conv2d_fwd(const Conv2dFwdArgs& a) {
  observe_call(OpId::conv2d_fwd, a);
  require_f32_or_bf16("conv2d_fwd", a.x.dtype);
  guarded("conv2d_fwd", conv_work(a.y, a.w), [&] {
    Context& c = *ctx_;
    Key key = conv_key(OpId::conv2d_fwd, a.p, a.x, a.w, a.b, a.y, a.z);
    key.add(int64_t{a.relu});
    // Inference kernels for versioned (folded, evaluation-only) weights on channels-last
    // activations: ResNet-50 at batch 1 took 47 against 63 ms with training's (2-vCPU EPYC);
    // on NCHW activations they were slower (64 against 53 ms), so those keep training's.
    // Winograd (Conv2dParams::winograd) for versioned f32 3x3 stride-1 weights on output
    // planes of 14x14 or more: ResNet-50's at batch 1 / 224² took 0.55-0.75x the time,
    // reorders included, its 7x7 ones about the same, and at batch 8 / 32² (planes of 8x8 and
    // less) the network took 1.5x (2-vCPU EPYC, docs/results/cpu_libtorch.md). No bf16 form.
    // A 1x1 stride-s convolution without padding reads every s-th pixel: in inference it runs
    // as the stride-1 convolution of those pixels, which the source's reorder gathers. oneDNN
    // 2.6's brgconv_1x1 took 1.8x the time of that for ResNet-50's 28x28 -> 14x14
    // downsampling at batch 1 (2-vCPU EPYC, docs/results/cpu_libtorch.md).
    const ConvForwardForm form = conv_forward_form(a);
    const bool wino = form.winograd, inference = form.inference, gather_1x1 = form.gather_1x1;
    key.add(int64_t{inference}).add(int64_t{wino});
    auto& pl = c.plan<FwdPlan>(key, [&] {
      auto p = std::make_unique<FwdPlan>();
      // oneDNN takes no view whose rows or images overlap the next ones' span (odd sizes
      // with more than one image): those keep the strided convolution.
      const std::optional<memory::desc> pixels = gather_1x1 ? every_strided_pixel(a.x, a.y, a.p) : std::nullopt;
      const memory::desc src = pixels ? *pixels : md_of(a.x);
      const memory::desc wei = weights_md(a.w, a.p.groups), dst = md_of(a.y);
      Conv2dParams cp = a.p;
      if (pixels) cp.stride_h = cp.stride_w = 1;
      const memory::desc bias = a.b.defined ? md_of(a.b) : memory::desc();
      const prop_kind prop = inference ? prop_kind::forward_inference : prop_kind::forward_training;
      const auto pd = [&] {
        if (wino) {
          try {
            return forward_pd(src, wei, bias, dst, cp, c.eng, epilogue_attr(a), prop, algorithm::convolution_winograd);
          } catch (const dnnl::error&) {
            // No Winograd kernel for this CPU or shape: the direct one.
          }
        }
        return forward_pd(src, wei, bias, dst, cp, c.eng, epilogue_attr(a), prop);
      }();
      p->prim = dnnl::convolution_forward(pd);
      p->src = Staged::make(src, pd.src_desc(), c.eng, true);
      p->wei_want = pd.weights_desc();
      try {
        p->wei = Staged::make(wei, p->wei_want, c.eng, true);
      } catch (const dnnl::error&) {
        if (!a.w_version || a.p.groups != 1) throw;
        const memory::desc plain(wei.dims(), wei.data_type(), memory::format_tag::abcd);
        if (wei == plain) throw;
        p->wei = Staged::make(wei, plain, c.eng, true);
        p->wei_via_plain = true;
        p->plain_to_want = dnnl::reorder(p->wei.inner, memory(p->wei_want, c.eng));
      }
      p->dst = Staged::make(dst, pd.dst_desc(), c.eng, false);
      p->args = {{DNNL_ARG_SRC, p->src.arg()}, {DNNL_ARG_WEIGHTS, p->wei.arg()}, {DNNL_ARG_DST, p->dst.arg()}};
      if (a.b.defined) {
        p->has_bias = true;
        p->bias = Staged::make(bias, pd.bias_desc(), c.eng, true);
        p->args.insert({DNNL_ARG_BIAS, p->bias.arg()});
      }
      if (a.z.defined) {
        p->has_z = true;
        p->z = memory(md_of(a.z), c.eng, DNNL_MEMORY_NONE);
        p->z_into_dst = dnnl::reorder(p->z, p->dst.arg());
      }
      return p;
    });
    const Operand dst{pl.dst, a.y.data};
    const bool wei_kept = a.w_version && pl.wei.reorders;
    if (wei_kept) {
      // The weights in the primitive's layout from an earlier call, or re-laid out once now.
      auto it = pl.kept.find(a.w.data);
      if (it == pl.kept.end() || it->second.version != *a.w_version) {
        if (it == pl.kept.end()) {
          if (pl.kept.size() >= kKeptWeightsMax) pl.kept.clear();
          it = pl.kept.emplace(a.w.data, KeptWeights{0, memory(pl.wei_want, c.eng)}).first;
        }
        pl.wei.bind(a.w.data);
        if (pl.wei_via_plain) {
          pl.wei.re.execute(c.strm, pl.wei.user, pl.wei.inner);
          pl.plain_to_want.execute(c.strm, pl.wei.inner, it->second.laid_out);
        } else {
          pl.wei.re.execute(c.strm, pl.wei.user, it->second.laid_out);
        }
        it->second.version = *a.w_version;
      }
      pl.args[DNNL_ARG_WEIGHTS] = it->second.laid_out;
    } else if (pl.wei.reorders) {
      pl.args[DNNL_ARG_WEIGHTS] = pl.wei.inner;
    }
    if (pl.has_z) {
      const Operand src{pl.src, a.x.data}, wei{pl.wei, a.w.data}, bias{pl.bias, a.b.data};
      for (const Operand& in : {src, wei}) in.staged.bind(in.data);
      if (pl.has_bias) bias.staged.bind(bias.data);
      pl.dst.bind(a.y.data);
      pl.z.set_data_handle(a.z.data);
      pl.src.pull(c.strm);
      if (!wei_kept) pl.wei.pull(c.strm);
      if (pl.has_bias) pl.bias.pull(c.strm);
      // z already where dst is (an in-place residual in the primitive's own layout): nothing to copy.
      if (pl.dst.reorders || a.z.data != a.y.data) {
        memory into = pl.dst.arg();  // a handle to the same memory (execute takes non-const handles)
        pl.z_into_dst.execute(c.strm, pl.z, into);
      }
      pl.prim.execute(c.strm, pl.args);
      pl.dst.push(c.strm);
      c.strm.wait();
      return;
    }
    if (wei_kept && pl.has_bias)
      run_planned(c, pl.prim, pl.args, {{pl.src, a.x.data}, {pl.bias, a.b.data}}, dst);
    else if (wei_kept)
      run_planned(c, pl.prim, pl.args, {{pl.src, a.x.data}}, dst);
    else if (pl.has_bias)
      run_planned(c, pl.prim, pl.args, {{pl.src, a.x.data}, {pl.wei, a.w.data}, {pl.bias, a.b.data}}, dst);
    else
      run_planned(c, pl.prim, pl.args, {{pl.src, a.x.data}, {pl.wei, a.w.data}}, dst);
  });
}

void OneDnnBackend::conv2d_bwd_data(const Conv2dBwdDataArgs& a) {
  observe_call(OpId::conv2d_bwd_data, a);
  require_f32_or_bf16("conv2d_bwd_data", a.dy.dtype);
  guarded("conv2d_bwd_data", conv_work(a.dy, a.w), [&] {
    Context& c = *ctx_;
    auto& pl = c.plan<BwdDataPlan>(conv_key(OpId::conv2d_bwd_data, a.p, a.dy, a.w, a.dx), [&] {
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
    run_planned(c, pl.prim, pl.args, {{pl.dy, a.dy.data}, {pl.wei, a.w.data}}, {pl.dx, a.dx.data});
  });
}

void OneDnnBackend::conv2d_bwd_weight(const Conv2dBwdWeightArgs& a) {
  observe_call(OpId::conv2d_bwd_weight, a);
  require_f32_or_bf16("conv2d_bwd_weight", a.x.dtype);
  guarded("conv2d_bwd_weight", conv_work(a.dy, a.dw), [&] {
    Context& c = *ctx_;
    auto& pl = c.plan<BwdWeightPlan>(conv_key(OpId::conv2d_bwd_weight, a.p, a.x, a.dy, a.dw), [&] {
      auto p = std::make_unique<BwdWeightPlan>();
      const memory::desc x = md_of(a.x), dw = weights_md(a.dw, a.p.groups), dy = md_of(a.dy);
      const auto hint = forward_pd(x, dw, memory::desc(), dy, a.p, c.eng);
      const ConvGeom g = geom(a.p);
      auto make_pd = [&](bool plain) {
        const dnnl::convolution_backward_weights::desc d(algorithm::convolution_direct, plain ? x : any_like(x),
                                                         plain ? dw : any_like(dw), plain ? dy : any_like(dy),
                                                         g.strides, g.dilates, g.pad_l, g.pad_r);
        return dnnl::convolution_backward_weights::primitive_desc(d, c.eng, hint);
      };
      // bf16 on small output planes: strata's own layouts, which oneDNN serves with its
      // GEMM-based kernel instead of jit_bf16 (see kBf16GemmBelow) — unless it has only
      // the reference kernel for them (NHWC in 2.6).
      dnnl::convolution_backward_weights::primitive_desc pd;
      if (a.x.dtype == DType::bf16 && a.dy.sizes[2] * a.dy.sizes[3] < kBf16GemmBelow) pd = make_pd(true);
      if (!pd || std::string_view(pd.impl_info_str()).substr(0, 3) == "ref") pd = make_pd(false);
      p->prim = dnnl::convolution_backward_weights(pd);
      p->x = Staged::make(x, pd.src_desc(), c.eng, true);
      p->dy = Staged::make(dy, pd.diff_dst_desc(), c.eng, true);
      p->dw = Staged::make(dw, pd.diff_weights_desc(), c.eng, false);
      if (unblock_1x1_applies(dw, pd.diff_weights_desc(), a.dw, a.p.groups)) {
        p->unblock_o = a.dw.sizes[0];
        p->unblock_i = a.dw.sizes[1];
      }
      p->args = {{DNNL_ARG_SRC, p->x.arg()}, {DNNL_ARG_DIFF_DST, p->dy.arg()},
                 {DNNL_ARG_DIFF_WEIGHTS, p->dw.arg()}};
      return p;
    });
    const bool unblock = pl.unblock_o > 0;
    run_planned(c, pl.prim, pl.args, {{pl.x, a.x.data}, {pl.dy, a.dy.data}}, {pl.dw, a.dw.data}, !unblock);
    if (unblock)
      unblock_1x1(static_cast<const float*>(pl.dw.inner.get_data_handle()), a.dw.ptr<float>(), pl.unblock_o,
                  pl.unblock_i);
  });
}

// db[k] = sum over n, h, w of dy. oneDNN 2.6 has only a reference implementation
// for a reduction that keeps the channel dim (milliseconds for a few thousand
// elements): the shared loop does it in double (bf16 widened element by element).
void OneDnnBackend::conv2d_bwd_bias(const Conv2dBwdBiasArgs& a) {
  observe_call(OpId::conv2d_bwd_bias, a);
  require_f32_or_bf16("conv2d_bwd_bias", a.dy.dtype);
  if (a.dy.dtype == DType::f32) return loops::conv_bias_grad<float>(a.dy, a.db);
  const bf16_t* dy = a.dy.ptr<const bf16_t>();
  const auto& st = a.dy.strides;
  for (int64_t k = 0; k < a.dy.sizes[1]; ++k) {
    double s = 0;
    for (int64_t n = 0; n < a.dy.sizes[0]; ++n)
      for (int64_t h = 0; h < a.dy.sizes[2]; ++h)
        for (int64_t w = 0; w < a.dy.sizes[3]; ++w) s += from_bf16(dy[n * st[0] + k * st[1] + h * st[2] + w * st[3]]);
    a.db.ptr<bf16_t>()[k * a.db.strides[0]] = to_bf16(static_cast<float>(s));
  }
}

}  // namespace strata::backends
