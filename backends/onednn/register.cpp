#include <string>

#include "strata/backends/onednn/context.h"

namespace strata::backends {

OneDnnBackend::OneDnnBackend() {
  onednn::guarded("engine", [&] { ctx_ = std::make_unique<onednn::Context>(); });
}
OneDnnBackend::~OneDnnBackend() = default;
OneDnnBackend::OneDnnBackend(OneDnnBackend&&) noexcept = default;
OneDnnBackend& OneDnnBackend::operator=(OneDnnBackend&&) noexcept = default;

// f32 for every op; f64 as well for the ops run by plain loops; bf16 for the ops
// with bf16 primitives where the CPU runs them natively; any dtype for fill and copy.
bool OneDnnBackend::supports(OpId op, DType dt) const {
  switch (op) {
    case OpId::fill:
    case OpId::copy:
      return true;
    case OpId::conv2d_fwd:
    case OpId::conv2d_bwd_data:
    case OpId::conv2d_bwd_weight:
    case OpId::conv2d_bwd_bias:
    case OpId::linear_fwd:
    case OpId::linear_bwd_data:
    case OpId::linear_bwd_weight:
    case OpId::relu_fwd:
    case OpId::relu_bwd:
    case OpId::add:
    case OpId::max_pool2d_fwd:
    case OpId::max_pool2d_bwd:
    case OpId::avg_pool2d_fwd:
    case OpId::avg_pool2d_bwd:
    case OpId::global_avg_pool_fwd:
    case OpId::global_avg_pool_bwd:
      return dt == DType::f32 || (dt == DType::bf16 && onednn::bf16_native());
    case OpId::axpy:
    case OpId::dropout_fwd:
    case OpId::dropout_bwd:
    case OpId::softmax_xent_bwd:
    case OpId::bce_logits_fwd:
    case OpId::bce_logits_bwd:
    case OpId::argmax:
    case OpId::sgd_step:
    case OpId::adam_step:
      return dt == DType::f32 || dt == DType::f64;
    default:
      return dt == DType::f32;
  }
}

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
