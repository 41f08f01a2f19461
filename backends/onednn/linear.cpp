// linear on oneDNN's matmul primitive. Transposes are strides, not copies: w^T is w
// described with swapped strides, dy^T likewise. f32, and bf16 where the CPU has it.
#include <vector>

#include "strata/backends/api/linear_epilogue.h"
#include "strata/backends/onednn/context.h"
#include "strata/backends/cpu/reduce.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using namespace onednn;  // NOLINT: this backend's internal vocabulary
namespace {

// A 2-D view read transposed: [cols, rows] with swapped strides.
memory::desc md_transposed(const TensorView& v) {
  const memory::desc m = md_of(v);
  const auto& st = m.data.format_desc.blocking.strides;
  return md_strided({v.sizes[1], v.sizes[0]}, {st[1], st[0]}, dnnl_dt(v.dtype));
}

struct MatmulPlan : Plan {
  dnnl::matmul prim;
  Staged src, wei, bias, dst;
  bool has_bias = false;
  Args args;
};

// dst = src * wei (+ bias), all described by the caller.
void matmul(Context& c, const Key& key, const memory::desc& src, const memory::desc& wei, const memory::desc& bias,
            const memory::desc& dst, const void* psrc, const void* pwei, const void* pbias, void* pdst) {
  auto& pl = c.plan<MatmulPlan>(key, [&] {
    // The primitive gets a dense bias (a strided one is staged through a reorder):
    // oneDNN 2.6's matmul accepted a [1, N] bias with a column stride of 2 and read it
    // as dense (tests/reliability's strided-bias case).
    const memory::desc dense_bias =
        bias.is_zero() ? bias : memory::desc(bias.dims(), bias.data_type(), memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd({src, wei, dense_bias, dst}, c.eng);
    auto p = std::make_unique<MatmulPlan>();
    p->prim = dnnl::matmul(pd);
    p->src = Staged::make(src, pd.src_desc(), c.eng, true);
    p->wei = Staged::make(wei, pd.weights_desc(), c.eng, true);
    p->dst = Staged::make(dst, pd.dst_desc(), c.eng, false);
    p->args = {{DNNL_ARG_SRC, p->src.arg()}, {DNNL_ARG_WEIGHTS, p->wei.arg()}, {DNNL_ARG_DST, p->dst.arg()}};
    if (!bias.is_zero()) {
      p->has_bias = true;
      p->bias = Staged::make(bias, pd.bias_desc(), c.eng, true);
      p->args.insert({DNNL_ARG_BIAS, p->bias.arg()});
    }
    return p;
  });
  pl.src.bind(psrc);
  pl.wei.bind(pwei);
  pl.dst.bind(pdst);
  pl.src.pull(c.strm);
  pl.wei.pull(c.strm);
  if (pl.has_bias) {
    pl.bias.bind(pbias);
    pl.bias.pull(c.strm);
  }
  pl.prim.execute(c.strm, pl.args);
  pl.dst.push(c.strm);
  c.strm.wait();
}

}  // namespace

// y [N,out] = x [N,in] * w^T [in,out] + b [1,out]
void OneDnnBackend::linear_fwd(const LinearFwdArgs& a) {
  if (a.act || a.z.defined || a.norm_eps) {
    const ComposedCall parts(OpId::linear_fwd);
    return linear_fwd_composed(*this, a);
  }
  observe_call(OpId::linear_fwd, a);
  require_f32_or_bf16("linear_fwd", a.x.dtype);
  guarded("linear_fwd", loops::product_work(a.y.numel() * a.w.sizes[1]), [&] {
    Key key(OpId::linear_fwd);
    key.views(a.x, a.w, a.b, a.y);
    const memory::desc bias =
        a.b.defined ? md_strided({1, a.b.sizes[0]}, {a.b.sizes[0] * a.b.strides[0], a.b.strides[0]}, dnnl_dt(a.b.dtype))
                    : memory::desc();
    matmul(*ctx_, key, md_of(a.x), md_transposed(a.w), bias, md_of(a.y), a.x.data, a.w.data, a.b.data, a.y.data);
  });
}

// dx [N,in] = dy [N,out] * w [out,in]
void OneDnnBackend::linear_bwd_data(const LinearBwdDataArgs& a) {
  if (a.act) {
    const ComposedCall parts(OpId::linear_bwd_data);
    return linear_act_bwd_data_composed(*this, a);
  }
  observe_call(OpId::linear_bwd_data, a);
  require_f32_or_bf16("linear_bwd_data", a.dy.dtype);
  guarded("linear_bwd_data", loops::product_work(a.dx.numel() * a.w.sizes[0]), [&] {
    Key key(OpId::linear_bwd_data);
    key.views(a.dy, a.w, a.dx);
    matmul(*ctx_, key, md_of(a.dy), md_of(a.w), memory::desc(), md_of(a.dx), a.dy.data, a.w.data, nullptr,
           a.dx.data);
  });
}

// dw [out,in] = dy^T [out,N] * x [N,in]; db [out] = sum over N of dy.
void OneDnnBackend::linear_bwd_weight(const LinearBwdWeightArgs& a) {
  observe_call(OpId::linear_bwd_weight, a);
  require_f32_or_bf16("linear_bwd_weight", a.x.dtype);
  guarded("linear_bwd_weight", loops::product_work(a.dw.numel() * a.x.sizes[0]), [&] {
    Key key(OpId::linear_bwd_weight);
    key.views(a.x, a.dy, a.dw);
    matmul(*ctx_, key, md_transposed(a.dy), md_of(a.x), memory::desc(), md_of(a.dw), a.dy.data, a.x.data, nullptr,
           a.dw.data);
  });
  // The bias gradient keeps a dim, which oneDNN 2.6 reduces only with its reference
  // implementation: the shared loop does it (see conv.cpp).
  if (!a.db.defined) return;
  if (a.dy.dtype == DType::f32) return loops::column_sums<float>(a.dy, a.db);
  std::vector<double> acc(static_cast<size_t>(a.dy.sizes[1]), 0.0);  // bf16: the same sums, widened
  const bf16_t* dy = a.dy.ptr<const bf16_t>();
  for (int64_t i = 0; i < a.dy.sizes[0]; ++i)
    for (int64_t o = 0; o < a.dy.sizes[1]; ++o) acc[o] += from_bf16(dy[i * a.dy.strides[0] + o * a.dy.strides[1]]);
  for (int64_t o = 0; o < a.dy.sizes[1]; ++o)
    a.db.ptr<bf16_t>()[o * a.db.strides[0]] = to_bf16(static_cast<float>(acc[o]));
}

}  // namespace strata::backends
