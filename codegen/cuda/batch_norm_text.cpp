// Batch norm in a training step as the cuda backend ran it (backends/cuda/batch_norm.cu): cuDNN's
// training forward (the batch's statistics, the saved mean and inverse std, the running statistics
// updated in place in the state), then for ResNet's fused forward strata's epilogue kernel (the
// residual add, ReLU and its mask over y in place); its backward from the saved statistics, after
// strata's masking kernel for a fused forward (into dz, the residual's gradient, or into dx, where
// cuDNN then reads it). strata's own batch norm kernels (channels-last, half precision, synchronised)
// and evaluation mode are refused by name.
#include "strata/codegen/cuda/train_text.h"
#include "strata/core/error.h"

namespace strata::codegen::cuda {

using backends::cuda::LibraryCall;
using Kind = LibraryCall::Kind;
using ops::TensorView;

namespace {

// The call's library record as the emitter expects it: cuDNN's call alone, or with strata's kernel
// for the fusion before it (kernel_first) or after it; strata's own batch norm is refused by name.
void expect_library(const RecordedCall& c, const std::string& op, Kind cudnn, Kind kernel, bool with_kernel,
                    bool kernel_first) {
  refuse_staging(c);
  for (const LibraryCall& l : c.library)
    STRATA_CHECK(l.kind != Kind::own_batch_norm, "strata_codegen: ", op, " ran on strata's own batch norm kernels "
                 "(channels-last, half precision, synchronised statistics or evaluation mode); the cuda emitter "
                 "writes out cuDNN's f32 NCHW batch norm in training only");
  std::vector<Kind> want{cudnn};
  if (with_kernel) want.insert(kernel_first ? want.begin() : want.end(), kernel);
  bool same = c.library.size() == want.size();
  for (size_t i = 0; same && i < want.size(); ++i) same = c.library[i].kind == want[i];
  STRATA_CHECK(same, "strata_codegen: ", op, ": the cuda backend ran it otherwise than by cuDNN's batch norm",
               with_kernel ? " and strata's kernel for its fusion" : "", " (", c.library.size(), " library calls), "
               "which is all the cuda emitter writes out for it");
}

std::string descriptors(const std::string& m, const TensorView& x, const TensorView& y, int64_t mode) {
  return "    " + m + " = batch_norm(legacy, " + dims_of(x) + ", " + strides_of(x) + ", " + dims_of(y) + ", " +
         strides_of(y) + ", static_cast<cudnnBatchNormMode_t>(" + std::to_string(mode) + "));\n";
}

std::string vector_ptr(Places& p, const TensorView& v, const std::string& what) {
  STRATA_CHECK(v.dtype == DType::f32 && v.dim() == 1 && v.strides[0] == 1, "strata_codegen: ", what, " is ",
               dtype_name(v.dtype), " ", v.sizes.str(), " with strides ", v.strides.str(), "; the cuda emitter "
               "writes out a batch norm's per-channel tensors as dense f32 vectors only");
  return p.ptr(v, what);
}

void require_training(const std::string& op, bool training, const ops::ChannelSumReducer* sync,
                      const TensorView& gamma) {
  STRATA_CHECK(training, "strata_codegen: ", op, " runs in evaluation mode inside a training step; the cuda emitter "
               "writes out batch norm in training only");
  STRATA_CHECK(!sync, "strata_codegen: ", op, " synchronises its statistics over replicas; the cuda emitter writes "
               "out one device's training step only");
  STRATA_CHECK(gamma.defined, "strata_codegen: ", op, " has no gamma; the cuda emitter writes out an affine batch "
               "norm only (strata fills a temporary for a missing one)");
}

}  // namespace

CallText batch_norm_fwd_text(const RecordedCall& c, const std::string& m, Places& p) {
  const auto& a = std::get<ops::BatchNormFwdArgs>(c.args);
  const std::string op = "batch_norm_fwd (" + c.layer + ")";
  const bool fused = a.z.defined || a.relu;
  expect_library(c, op, Kind::batch_norm, Kind::batch_norm_epilogue, fused, false);
  require_training(op, a.training, a.sync, a.gamma);
  STRATA_CHECK(a.beta.defined && a.save_mean.defined && a.save_invstd.defined, "strata_codegen: ", op, " has no "
               "beta or saves no statistics; the cuda emitter writes out an affine batch norm's training forward only");
  STRATA_CHECK(!a.relu_mask.defined || a.relu, "strata_codegen: ", op, ": a ReLU mask without a ReLU (internal "
               "error)");
  require_dense_f32(a.x, op + " x");
  require_dense_f32(a.y, op + " y");
  if (a.z.defined) require_dense_f32(a.z, op + " z");
  // cuDNN may choose its kernels by the addresses' alignment too: the program's must be strata's.
  p.align(a.x, op + " x");
  p.align(a.y, op + " y");
  const int64_t mode = c.library.front().mode;
  const auto running = [&](const TensorView& v, const char* name) {
    return v.defined ? vector_ptr(p, v, op + " " + name) : std::string("nullptr");
  };
  CallText t;
  t.member = "BatchNorm " + m + ";";
  t.load = descriptors(m, a.x, a.y, mode);
  // The running statistics in the state, updated in place; the saved ones for the backward.
  t.run = "  CHECK(cudnnBatchNormalizationForwardTraining(cudnn, static_cast<cudnnBatchNormMode_t>(" +
          std::to_string(mode) + "), &kOne, &kZero, " + m + ".x, " + p.ptr(a.x, op + " x") + ",\n      " + m + ".y, " +
          p.ptr(a.y, op + " y") + ", " + m + ".param, " + vector_ptr(p, a.gamma, op + " gamma") + ", " +
          vector_ptr(p, a.beta, op + " beta") + ", " + num(a.momentum) + ",\n      " +
          running(a.running_mean, "running_mean") + ", " + running(a.running_var, "running_var") + ", " + num(a.eps) +
          ", " + vector_ptr(p, a.save_mean, op + " save_mean") + ", " +
          vector_ptr(p, a.save_invstd, op + " save_invstd") + "));\n";
  t.how = "cudnnBatchNormalizationForwardTraining, mode " + std::to_string(mode);
  if (fused) {
    t.run += "  kernels::batch_norm_epilogue(stream, " + p.fptr(a.y, op + " y") + ", " +
             (a.z.defined ? p.fptr(a.z, op + " z") : std::string("nullptr")) + ", " +
             (a.relu_mask.defined ? mask_ptr(p, a.relu_mask, op + " relu_mask") : std::string("nullptr")) + ", " +
             std::to_string(a.y.numel()) + ", " + (a.relu ? "true" : "false") + ");\n";
    t.how += std::string("; then ") + (a.z.defined ? "the residual, " : "") + (a.relu ? "ReLU" : "") +
             (a.relu_mask.defined ? " and its mask" : "") + " in strata's epilogue kernel";
  }
  return t;
}

CallText batch_norm_bwd_text(const RecordedCall& c, const std::string& m, Places& p) {
  const auto& a = std::get<ops::BatchNormBwdArgs>(c.args);
  const std::string op = "batch_norm_bwd (" + c.layer + ")";
  const bool masked = a.relu_mask.defined;
  expect_library(c, op, Kind::batch_norm_bwd, Kind::batch_norm_mask, masked, true);
  require_training(op, a.training, a.sync, a.gamma);
  STRATA_CHECK(a.dx.defined && a.dgamma.defined && a.dbeta.defined, "strata_codegen: ", op, " leaves dx, dgamma or "
               "dbeta out; the cuda emitter writes out a batch norm's full backward only");
  STRATA_CHECK(!a.dz.defined || masked, "strata_codegen: ", op, ": a residual gradient without a mask (internal "
               "error)");
  for (const auto& [v, name] : {std::pair{&a.x, " x"}, {&a.dy, " dy"}, {&a.dx, " dx"}})
    require_dense_f32(*v, op + name);
  if (a.dz.defined) require_dense_f32(a.dz, op + " dz");
  for (const auto& [v, name] : {std::pair{&a.x, " x"}, {&a.dy, " dy"}, {&a.dx, " dx"}}) p.align(*v, op + name);
  const int64_t mode = c.library.back().mode;
  CallText t;
  t.member = "BatchNorm " + m + ";";
  t.load = descriptors(m, a.x, a.dx, mode);
  // cuDNN reads the masked gradient where strata's kernel wrote it: dz when the residual needs it,
  // else dx, which cuDNN's backward then overwrites.
  std::string dy = p.ptr(a.dy, op + " dy");
  if (masked) {
    const TensorView& g = a.dz.defined ? a.dz : a.dx;
    const std::string gname = op + (a.dz.defined ? " dz" : " dx");
    t.run = "  kernels::batch_norm_mask(stream, " + p.fptr(a.dy, op + " dy") + ", " +
            mask_ptr(p, a.relu_mask, op + " relu_mask") + ", " + p.fptr(g, gname) + ", " +
            std::to_string(a.dy.numel()) + ");\n";
    dy = p.ptr(g, gname);
  }
  // With saved statistics cuDNN does not use epsilon; strata passes 1e-5.
  t.run += "  CHECK(cudnnBatchNormalizationBackward(cudnn, static_cast<cudnnBatchNormMode_t>(" + std::to_string(mode) +
           "), &kOne, &kZero, &kOne, &kZero,\n      " + m + ".x, " + p.ptr(a.x, op + " x") + ", " + m + ".x, " + dy +
           ", " + m + ".y, " + p.ptr(a.dx, op + " dx") + ", " + m + ".param,\n      " +
           vector_ptr(p, a.gamma, op + " gamma") + ", " + vector_ptr(p, a.dgamma, op + " dgamma") + ", " +
           vector_ptr(p, a.dbeta, op + " dbeta") + ", 1e-5, " + vector_ptr(p, a.save_mean, op + " save_mean") + ", " +
           vector_ptr(p, a.save_invstd, op + " save_invstd") + "));\n";
  t.how = std::string(masked ? "strata's masking kernel (the fused ReLU's gradient" +
                                   std::string(a.dz.defined ? ", into the residual's" : "") + "), then " : "") +
          "cudnnBatchNormalizationBackward, mode " + std::to_string(mode);
  return t;
}

}  // namespace strata::codegen::cuda
