// Reductions on oneDNN's reduction primitive: sum and mean over all elements to a
// rank-0 tensor.
#include "strata/backends/onednn/context.h"
#include "strata/backends/cpu/reduce.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using namespace onednn;  // NOLINT: this backend's internal vocabulary
using dnnl::algorithm;

namespace onednn {
namespace {
struct ReducePlan : Plan {
  dnnl::primitive prim;
  Staged src, dst;
  Args args;
};
}  // namespace

void reduce(Context& c, const Key& key, algorithm alg, const memory::desc& src, const memory::desc& dst,
            const void* src_ptr, void* dst_ptr) {
  auto& pl = c.plan<ReducePlan>(key, [&] {
    auto p = std::make_unique<ReducePlan>();
    if (src.dims() == dst.dims()) {  // nothing to reduce (oneDNN rejects it): a copy
      p->src = Staged::make(src, src, c.eng, true);
      p->dst = Staged::make(dst, dst, c.eng, false);
      p->prim = dnnl::reorder(p->src.user, p->dst.user);
    } else {
      const dnnl::reduction::desc d(alg, src, dst, 0.f, 0.f);
      const dnnl::reduction::primitive_desc pd(d, c.eng);
      p->prim = dnnl::reduction(pd);
      p->src = Staged::make(src, pd.src_desc(), c.eng, true);
      p->dst = Staged::make(dst, pd.dst_desc(), c.eng, false);
    }
    p->args = {{DNNL_ARG_SRC, p->src.arg()}, {DNNL_ARG_DST, p->dst.arg()}};
    return p;
  });
  pl.src.bind(src_ptr);
  pl.dst.bind(dst_ptr);
  pl.src.pull(c.strm);
  pl.prim.execute(c.strm, pl.args);
  pl.dst.push(c.strm);
  c.strm.wait();
}
}  // namespace onednn

namespace {
// x -> y rank 0. A dense x (any dim order) is described as one flat dim, which
// oneDNN reduces with its JIT kernel; other views (oneDNN 2.6 would use its
// reference implementation) and small ones (see kLoopBelow) take the shared loop.
template <class Loop>
void reduce_all(Context& c, OpId op, algorithm alg, const ReduceArgs& a, Loop&& loop) {
  if (!loops::is_dense(a.x) || a.x.numel() < kLoopBelow) return loop();
  Key key(op);
  key.add(a.x.numel());
  reduce(c, key, alg, md_strided({a.x.numel()}, {1}), md_strided({1}, {1}), a.x.data, a.y.data);
}
}  // namespace

void OneDnnBackend::sum(const ReduceArgs& a) {
  require_f32("sum", a.x.dtype);
  guarded("sum", loops::elementwise_work(a.x.numel()), [&] {
    reduce_all(*ctx_, OpId::sum, algorithm::reduction_sum, a, [&] { loops::sum<float>(a); });
  });
}

void OneDnnBackend::mean(const ReduceArgs& a) {
  require_f32("mean", a.x.dtype);
  guarded("mean", loops::elementwise_work(a.x.numel()), [&] {
    reduce_all(*ctx_, OpId::mean, algorithm::reduction_mean, a, [&] { loops::mean<float>(a); });
  });
}

}  // namespace strata::backends
