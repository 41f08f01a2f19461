// The tensor API's ops (comparisons, where, reductions over dims, softmax, bmm, index_select,
// index_add) and the transformer's (layer norm, attention): the shared CPU loops, computed in double for f32 and f64 (the oracle's precision).
// Comparisons compare in the operands' own type (double would round large i64 labels).
#include "strata/backends/cpu/tensor_ops.h"
#include "strata/backends/cpu/transformer_ops.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/backends/reference/strided.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

void ReferenceBackend::compare(const CompareArgs& a) {
  loops::visit_numeric(kName, "compare", a.a.dtype, [&](auto t) { loops::compare<decltype(t)>(a); });
}
void ReferenceBackend::where(const WhereArgs& a) {
  ref::visit_float(a.a.dtype, "where", [&](auto t) { loops::where<decltype(t)>(a); });
}
void ReferenceBackend::reduce_dims(const ReduceDimsArgs& a) {
  ref::visit_float(a.x.dtype, "reduce_dims", [&](auto t) { loops::reduce_dims<decltype(t), double>(a); });
}
void ReferenceBackend::softmax_fwd(const SoftmaxArgs& a) {
  ref::visit_float(a.x.dtype, "softmax_fwd", [&](auto t) { loops::softmax_fwd<decltype(t), double>(a); });
}
void ReferenceBackend::softmax_bwd(const SoftmaxBwdArgs& a) {
  ref::visit_float(a.y.dtype, "softmax_bwd", [&](auto t) { loops::softmax_bwd<decltype(t), double>(a); });
}
void ReferenceBackend::bmm(const BmmArgs& a) {
  ref::visit_float(a.a.dtype, "bmm", [&](auto t) { loops::bmm<decltype(t), double>(a); });
}
void ReferenceBackend::index_select(const IndexSelectArgs& a) { loops::index_select(a); }
void ReferenceBackend::index_add(const IndexAddArgs& a) {
  ref::visit_float(a.x.dtype, "index_add", [&](auto t) { loops::index_add<decltype(t), double>(a); });
}

void ReferenceBackend::layer_norm_fwd(const LayerNormFwdArgs& a) {
  ref::visit_float(a.x.dtype, "layer_norm_fwd", [&](auto t) { loops::layer_norm_fwd<decltype(t), double>(a); });
}
void ReferenceBackend::layer_norm_bwd(const LayerNormBwdArgs& a) {
  ref::visit_float(a.x.dtype, "layer_norm_bwd", [&](auto t) { loops::layer_norm_bwd<decltype(t), double>(a); });
}
void ReferenceBackend::attention_fwd(const AttentionFwdArgs& a) {
  ref::visit_float(a.q.dtype, "attention_fwd", [&](auto t) { loops::attention_fwd<decltype(t), double>(a); });
}
void ReferenceBackend::attention_bwd(const AttentionBwdArgs& a) {
  ref::visit_float(a.q.dtype, "attention_bwd", [&](auto t) { loops::attention_bwd<decltype(t), double>(a); });
}

}  // namespace strata::backends
