#include <string>

#include "strata/backends/onednn/context.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace {
// f32 for every op; f64 as well for the ops run by plain loops; bf16 for the ops with
// bf16 primitives, where the CPU runs them natively; any dtype for fill and copy.
Capabilities onednn_table(bool bf16_native) {
  const DTypeSet primitives = bf16_native ? DTypeSet{DType::f32, DType::bf16} : kFloat32;
  Capabilities c;
  c.all(kFloat32)
      .kind(OpKind::memory, kAnyDType)
      .kind(OpKind::optimizer, kFloat)
      .kind(OpKind::conv, primitives)
      .kind(OpKind::linear, primitives)
      .kind(OpKind::pool, primitives)
      .op({OpId::relu_fwd, OpId::relu_bwd, OpId::add}, primitives)
      .op({OpId::axpy, OpId::unary_fwd, OpId::unary_bwd, OpId::binary_fwd, OpId::binary_bwd, OpId::dropout_fwd,
           OpId::dropout_bwd, OpId::softmax_xent_fwd, OpId::softmax_xent_bwd, OpId::bce_logits_fwd, OpId::bce_logits_bwd,
           OpId::argmax},
          kFloat)
      .op({OpId::compare}, kNumeric)
      .op({OpId::where, OpId::reduce_dims, OpId::softmax_fwd, OpId::softmax_bwd, OpId::bmm, OpId::index_add,
           OpId::layer_norm_fwd, OpId::layer_norm_bwd, OpId::attention_fwd, OpId::attention_bwd},
          kFloat)
      .keep_versioned_weights()
      .accumulate_residual_in_place();
  return c;
}
}  // namespace

OneDnnBackend::OneDnnBackend() {
  onednn::guarded("engine", [&] { ctx_ = std::make_unique<onednn::Context>(); });
  capabilities_ = onednn_table(onednn::bf16_native());
}
OneDnnBackend::~OneDnnBackend() = default;
OneDnnBackend::OneDnnBackend(OneDnnBackend&&) noexcept = default;
OneDnnBackend& OneDnnBackend::operator=(OneDnnBackend&&) noexcept = default;

const Capabilities& OneDnnBackend::capabilities() const { return capabilities_; }

void OneDnnBackend::synchronize() { ctx_->strm.wait(); }

size_t OneDnnBackend::cached_plans() const { return ctx_->cache.size(); }

namespace onednn {
bool bf16_native() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}
}  // namespace onednn

namespace {
const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}
}  // namespace

namespace onednn {
const char* effective_isa_name() { return isa_name(dnnl::get_effective_cpu_isa()); }
}  // namespace onednn

std::string OneDnnBackend::describe() const {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " (cpu runtime " + (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : std::to_string(v->cpu_runtime)) +
         ", isa " + isa_name(dnnl::get_effective_cpu_isa()) + ", bf16 " +
         (onednn::bf16_native() ? "native" : "unavailable") + "), " +
         std::to_string(ctx_->cache.size()) + " cached plans";
}

BackendFactoryResult make_backend_onednn() {
  return {std::make_unique<BackendAdapter<OneDnnBackend>>(), {}};
}

}  // namespace strata::backends
