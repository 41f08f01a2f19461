// Element-wise ops on oneDNN: ReLU forward/backward (eltwise relu, backward from the
// forward output), add (binary add), scale (reorder with a runtime output scale)
// and the softmax of softmax cross-entropy. oneDNN 2.6's eltwise and softmax take one
// layout for input and output: an output of another layout goes through the plan's
// staging reorder. Tensors below kLoopBelow elements run on the shared plain loops
// (see context.h); bf16 (relu, add) always runs on the primitives.
#include "strata/backends/onednn/context.h"
#include "strata/backends/cpu/elementwise.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using namespace onednn;  // NOLINT: this backend's internal vocabulary
using dnnl::algorithm;
using dnnl::prop_kind;

namespace {

// One primitive with one input and one output (eltwise forward, softmax).
struct UnaryPlan : Plan {
  dnnl::primitive prim;
  Staged src, dst;
  Args args;
};

void run_unary(Context& c, UnaryPlan& pl, const void* src, void* dst) {
  pl.src.bind(src);
  pl.dst.bind(dst);
  pl.src.pull(c.strm);
  pl.prim.execute(c.strm, pl.args);
  pl.dst.push(c.strm);
  c.strm.wait();
}

// Eltwise forward y = f(x) in x's layout.
void eltwise(Context& c, OpId op, algorithm alg, const TensorView& x, const TensorView& y) {
  Key key(op);
  key.views(x, y);
  auto& pl = c.plan<UnaryPlan>(key, [&] {
    const memory::desc src = md_of(x), dst = md_of(y);
    const dnnl::eltwise_forward::desc d(prop_kind::forward_training, alg, src, 0.f, 0.f);
    const dnnl::eltwise_forward::primitive_desc pd(d, c.eng);
    auto p = std::make_unique<UnaryPlan>();
    p->prim = dnnl::eltwise_forward(pd);
    p->src = Staged::make(src, pd.src_desc(), c.eng, true);
    p->dst = Staged::make(dst, pd.dst_desc(), c.eng, false);
    p->args = {{DNNL_ARG_SRC, p->src.arg()}, {DNNL_ARG_DST, p->dst.arg()}};
    return p;
  });
  run_unary(c, pl, x.data, y.data);
}

struct ReluBwdPlan : Plan {
  dnnl::eltwise_backward prim;
  Staged y, dy, dx;
  Args args;
};

struct BinaryPlan : Plan {
  dnnl::binary prim;
  Staged a, b, y;
  Args args;
};

}  // namespace

void OneDnnBackend::relu_fwd(const ReluFwdArgs& a) {
  observe_call(OpId::relu_fwd, a);
  require_f32_or_bf16("relu_fwd", a.x.dtype);
  if (a.x.dtype == DType::f32 && a.x.numel() < kLoopBelow) return loops::relu_fwd<float>(a);
  guarded("relu_fwd", loops::elementwise_work(a.x.numel()),
          [&] { eltwise(*ctx_, OpId::relu_fwd, algorithm::eltwise_relu, a.x, a.y); });
}

// dx = dy where y > 0: eltwise_relu_use_dst_for_bwd with alpha 0 is exactly that.
void OneDnnBackend::relu_bwd(const ReluBwdArgs& a) {
  observe_call(OpId::relu_bwd, a);
  require_f32_or_bf16("relu_bwd", a.dy.dtype);
  if (a.dy.dtype == DType::f32 && a.dy.numel() < kLoopBelow) return loops::relu_bwd<float>(a);
  guarded("relu_bwd", loops::elementwise_work(a.dy.numel()), [&] {
    Context& c = *ctx_;
    Key key(OpId::relu_bwd);
    key.views(a.y, a.dy, a.dx);
    auto& pl = c.plan<ReluBwdPlan>(key, [&] {
      const memory::desc y = md_of(a.y), dy = md_of(a.dy), dx = md_of(a.dx);
      const algorithm alg = algorithm::eltwise_relu_use_dst_for_bwd;
      const dnnl::eltwise_forward::primitive_desc hint({prop_kind::forward_training, alg, y, 0.f, 0.f}, c.eng);
      const dnnl::eltwise_backward::desc d(alg, dx, y, 0.f, 0.f);
      const dnnl::eltwise_backward::primitive_desc pd(d, c.eng, hint);
      auto p = std::make_unique<ReluBwdPlan>();
      p->prim = dnnl::eltwise_backward(pd);
      p->y = Staged::make(y, pd.dst_desc(), c.eng, true);
      p->dy = Staged::make(dy, pd.diff_dst_desc(), c.eng, true);
      p->dx = Staged::make(dx, pd.diff_src_desc(), c.eng, false);
      p->args = {{DNNL_ARG_DST, p->y.arg()}, {DNNL_ARG_DIFF_DST, p->dy.arg()}, {DNNL_ARG_DIFF_SRC, p->dx.arg()}};
      return p;
    });
    pl.y.bind(a.y.data);
    pl.dy.bind(a.dy.data);
    pl.dx.bind(a.dx.data);
    pl.y.pull(c.strm);
    pl.dy.pull(c.strm);
    pl.prim.execute(c.strm, pl.args);
    pl.dx.push(c.strm);
    c.strm.wait();
  });
}

void OneDnnBackend::add(const AddArgs& a) {
  observe_call(OpId::add, a);
  require_f32_or_bf16("add", a.a.dtype);
  if (a.a.dtype == DType::f32 && a.a.numel() < kLoopBelow) return loops::add<float>(a);
  guarded("add", loops::elementwise_work(a.y.numel()), [&] {
    Context& c = *ctx_;
    Key key(OpId::add);
    key.views(a.a, a.b, a.y);
    auto& pl = c.plan<BinaryPlan>(key, [&] {
      const memory::desc ma = md_of(a.a), mb = md_of(a.b), my = md_of(a.y);
      dnnl::binary::primitive_desc pd({algorithm::binary_add, ma, mb, my}, c.eng);
      // Mixed layouts get only the reference implementation: reorder the inputs to
      // the output's layout (a JIT reorder) and add with the JIT kernel instead.
      if (std::string_view(pd.impl_info_str()).substr(0, 3) == "ref")
        pd = dnnl::binary::primitive_desc({algorithm::binary_add, my, my, my}, c.eng);
      auto p = std::make_unique<BinaryPlan>();
      p->prim = dnnl::binary(pd);
      p->a = Staged::make(ma, pd.src_desc(0), c.eng, true);
      p->b = Staged::make(mb, pd.src_desc(1), c.eng, true);
      p->y = Staged::make(my, pd.dst_desc(), c.eng, false);
      p->args = {{DNNL_ARG_SRC_0, p->a.arg()}, {DNNL_ARG_SRC_1, p->b.arg()}, {DNNL_ARG_DST, p->y.arg()}};
      return p;
    });
    pl.a.bind(a.a.data);
    pl.b.bind(a.b.data);
    pl.y.bind(a.y.data);
    pl.a.pull(c.strm);
    pl.b.pull(c.strm);
    pl.prim.execute(c.strm, pl.args);
    pl.y.push(c.strm);
    c.strm.wait();
  });
}

// y = alpha x: a reorder with a runtime output scale, so one plan serves every alpha
// (eltwise linear would bake alpha into the primitive) and x and y may differ in
// layout.
struct ScalePlan : Plan {
  dnnl::reorder prim;
  memory x, y, alpha;
  Args args;
};

void OneDnnBackend::scale(const ScaleArgs& a) {
  require_f32("scale", a.x.dtype);
  if (a.x.numel() < kLoopBelow) return loops::scale<float>(a);
  guarded("scale", loops::elementwise_work(a.x.numel()), [&] {
    Context& c = *ctx_;
    Key key(OpId::scale);
    key.views(a.x, a.y);
    auto& pl = c.plan<ScalePlan>(key, [&] {
      auto p = std::make_unique<ScalePlan>();
      p->x = memory(md_of(a.x), c.eng, DNNL_MEMORY_NONE);
      p->y = memory(md_of(a.y), c.eng, DNNL_MEMORY_NONE);
      p->alpha = memory(plain_1d(1), c.eng);
      dnnl::primitive_attr attr;
      attr.set_output_scales(0, {DNNL_RUNTIME_F32_VAL});
      p->prim = dnnl::reorder(dnnl::reorder::primitive_desc(c.eng, md_of(a.x), c.eng, md_of(a.y), attr));
      p->args = {{DNNL_ARG_FROM, p->x}, {DNNL_ARG_TO, p->y}, {DNNL_ARG_ATTR_OUTPUT_SCALES, p->alpha}};
      return p;
    });
    *static_cast<float*>(pl.alpha.get_data_handle()) = static_cast<float>(a.alpha);
    pl.x.set_data_handle(a.x.data);
    pl.y.set_data_handle(a.y.data);
    pl.prim.execute(c.strm, pl.args);
    c.strm.wait();
  });
}

}  // namespace strata::backends
