// A training step's calls as the cuda backend ran them, beyond the forward's (emitter.cpp): the
// backward of convolutions, linear layers, ReLU and max pooling with the library choices strata
// made, batch norm (batch_norm_text.cpp), and strata's own kernels for the loss, fill, dropout, the
// bias gradients' sums, global average pooling's and space-to-depth's backward and SGD, with the
// geometry the backend reported where it orders a sum.
#include "strata/backends/cuda/strided.h"
#include "strata/codegen/cuda/train_text.h"
#include "strata/core/error.h"

namespace strata::codegen::cuda {

using backends::cuda::LibraryCall;
using Kind = LibraryCall::Kind;
using ops::OpId;
using ops::TensorView;

namespace {

std::string i64(int64_t v) { return std::to_string(v); }

// Dropout's scale of the kept values, 1 / (1 - p) (0 when all are dropped), as the backends compute it.
double dropout_inv_keep(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

std::string labels_ptr(Places& p, const TensorView& v, const std::string& what) {
  STRATA_CHECK(v.dtype == DType::i64 && v.dim() == 1, "strata_codegen: ", what, " is ", dtype_name(v.dtype), " ",
               v.sizes.str(), "; the cuda emitter writes out i64 labels [N] only");
  return "reinterpret_cast<const int64_t*>(" + p.ptr(v, what) + ")";
}

void require_matrix(const TensorView& v, const std::string& what) {
  STRATA_CHECK(v.dtype == DType::f32 && v.dim() == 2, "strata_codegen: ", what, " is ", dtype_name(v.dtype), " ",
               v.sizes.str(), "; the cuda emitter writes out f32 [rows, columns] operands only");
}

// dy's per-channel sums into db, as sum_along runs them (channel_reduce.cuh), or its column sums.
std::string bias_sums(const LibraryCall& l, const TensorView& dy, const TensorView& db, const std::string& op,
                      Places& p, TrainScratch& scratch) {
  STRATA_CHECK(db.dtype == DType::f32 && db.dim() == 1, "strata_codegen: ", op, ": the bias gradient must be f32");
  const std::string x = p.fptr(dy, op + " dy"), out = p.fptr(db, op + " db");
  const int64_t channels = dy.sizes[1];
  if (l.kind == Kind::column_sums) {
    require_matrix(dy, op + " dy");
    const std::string partial = scratch.doubles(l.m * channels);
    if (l.mode) p.align(dy, op + " dy");  // read in 16-byte packs only where strata's was aligned
    return "  kernels::column_sums(stream, " + x + ", " + i64(dy.sizes[0]) + ", " + i64(channels) + ", " +
           i64(dy.strides[0]) + ", " + (l.mode ? "true" : "false") + ", " + i64(l.m) + ", " + i64(l.k) + ", " +
           partial + ", " + out + ", " + i64(db.strides[0]) + ");\n";
  }
  STRATA_CHECK(l.kind == Kind::channel_sums, "strata_codegen: ", op, ": the bias gradient ran otherwise than by "
               "strata's channel or column sums (kind ", static_cast<int>(l.kind), ")");
  STRATA_CHECK(dy.dtype == DType::f32, "strata_codegen: ", op, ": dy must be f32");
  // The rest of dy as the backend indexes it: every dimension but the channel's, coalesced.
  Shape rest, rest_strides;
  for (int d = 0; d < dy.dim(); ++d)
    if (d != 1) rest.push_back(dy.sizes[d]), rest_strides.push_back(dy.strides[d]);
  const auto st = backends::cuda::make_strided<1>(rest, {rest_strides});
  const bool inner = dy.strides[1] == 1 && channels != 1;
  STRATA_CHECK(inner == (l.mode == 1), "strata_codegen: ", op, ": the channel sums ran ", l.mode ? "" : "not ",
               "channels-innermost where the emitter finds otherwise (internal error)");
  std::vector<int64_t> sizes(st.sizes, st.sizes + st.nd), strides(st.strides[0], st.strides[0] + st.nd);
  return "  {\n    const int64_t sizes[] = " + ints(sizes) + ", strides[] = " + ints(strides) +
         ";\n    kernels::channel_sums(stream, " + x + ", " + i64(channels) + ", " + i64(dy.strides[1]) + ", " +
         i64(st.nd) + ", sizes, strides, " + (inner ? "true" : "false") + ", " + i64(l.m) + ", " + i64(l.k) +
         ",\n                          " + scratch.doubles(l.m * channels) + ", " + scratch.doubles(channels) + ", " +
         out + ", " + i64(db.strides[0]) + ");\n  }\n";
}

CallText linear_bwd(const RecordedCall& c, Places& p, TrainScratch& scratch) {
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  refuse_staging(c);
  CallText t;
  const LibraryCall* gemm = nullptr;
  const LibraryCall* sums = nullptr;
  for (const LibraryCall& l : c.library)
    (l.kind == Kind::gemm && !gemm ? gemm : sums) = &l;
  if (const auto* a = std::get_if<ops::LinearBwdDataArgs>(&c.args)) {
    STRATA_CHECK(!a->act, "strata_codegen: ", op, " has an activation epilogue, which the cuda emitter does not "
                 "write out yet");
    STRATA_CHECK(gemm && !sums, "strata_codegen: ", op, ": the cuda backend ran it otherwise than by one "
                 "cublasGemmEx, which is all the cuda emitter writes out for it");
    for (const auto& [v, name] : {std::pair{&a->dy, " dy"}, {&a->w, " w"}, {&a->dx, " dx"}})
      require_dense_f32(*v, op + name);
    t.run = gemm_text(*gemm, {{&a->dy, "dy"}, {&a->w, "w"}, {&a->dx, "dx"}}, op, p);
    t.how = "cublasGemmEx (CUBLAS_GEMM_DEFAULT)";
    return t;
  }
  const auto& a = std::get<ops::LinearBwdWeightArgs>(c.args);
  for (const auto& [v, name] : {std::pair{&a.dy, " dy"}, {&a.x, " x"}, {&a.dw, " dw"}}) require_dense_f32(*v, op + name);
  STRATA_CHECK(gemm && (sums != nullptr) == (a.db.defined && a.db.numel() > 0), "strata_codegen: ", op, ": the cuda "
               "backend ran it otherwise than by one cublasGemmEx and the bias gradient's sums");
  t.run = gemm_text(*gemm, {{&a.dy, "dy"}, {&a.x, "x"}, {&a.dw, "dw"}}, op, p);
  t.how = "cublasGemmEx (CUBLAS_GEMM_DEFAULT)";
  if (sums) {
    t.run += bias_sums(*sums, a.dy, a.db, op, p, scratch);
    t.how += ", then the bias gradient by strata's " +
             std::string(sums->kind == Kind::column_sums ? "column sums" : "channel sums");
  }
  return t;
}

}  // namespace

std::string mask_ptr(Places& p, const TensorView& v, const std::string& what) {
  STRATA_CHECK(v.dtype == DType::u8 && v.is_contiguous(), "strata_codegen: ", what, " is not a dense u8 mask");
  return "reinterpret_cast<uint8_t*>(" + p.ptr(v, what) + ")";
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string TrainScratch::doubles(int64_t n) { return "reinterpret_cast<double*>(" + bytes(n * 8) + ")"; }

std::string TrainScratch::bytes(int64_t n) {
  const std::string at = "scratch + " + std::to_string(bytes_);
  bytes_ += (n + 255) / 256 * 256;
  return at;
}

CallText train_text(const RecordedCall& c, const std::string& m, Places& p, TrainScratch& scratch,
                    const std::string& counter) {
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  CallText t;
  switch (c.op) {
    case OpId::conv2d_bwd_data:
    case OpId::conv2d_bwd_weight: return conv_bwd_text(c, m, p);
    case OpId::linear_bwd_data:
    case OpId::linear_bwd_weight: return linear_bwd(c, p, scratch);
    case OpId::conv2d_bwd_bias: {
      const auto& a = std::get<ops::Conv2dBwdBiasArgs>(c.args);
      refuse_staging(c);
      STRATA_CHECK(c.library.size() == 1, "strata_codegen: ", op, ": the cuda backend ran it otherwise than by "
                   "strata's channel sums");
      t.run = bias_sums(c.library[0], a.dy, a.db, op, p, scratch);
      t.how = "strata's channel sums";
      return t;
    }
    case OpId::relu_bwd: {
      const auto& a = std::get<ops::ReluBwdArgs>(c.args);
      for (const auto& [v, name] : {std::pair{&a.y, " y"}, {&a.dy, " dy"}, {&a.dx, " dx"}})
        require_dense_f32(*v, op + name);
      refuse_staging(c);
      if (!c.library.empty() && c.library[0].kind == Kind::activation_bwd) {
        only(c, Kind::activation_bwd, "cudnnActivationBackward");
        // As the backend's plan: y stands in for x (x > 0 exactly where y > 0), one descriptor for y and dy.
        t.member = "Activation " + m + ";";
        t.load = "    " + m + " = {legacy.tensor(" + dims_of(a.y) + ", " + strides_of(a.y) + "), legacy.tensor(" +
                 dims_of(a.dx) + ", " + strides_of(a.dx) + "), legacy.relu()};\n";
        const std::string y = p.ptr(a.y, op + " y");
        t.run = "  CHECK(cudnnActivationBackward(cudnn, " + m + ".act, &kOne, " + m + ".x, " + y + ", " + m + ".x, " +
                p.ptr(a.dy, op + " dy") + ", " + m + ".x, " + y + ", &kZero, " + m + ".y, " +
                p.ptr(a.dx, op + " dx") + "));\n";
        t.how = "cudnnActivationBackward";
        return t;
      }
      only(c, Kind::own_kernel, "strata's kernel");
      t.run = "  kernels::relu_bwd(stream, " + p.fptr(a.y, op + " y") + ", " + p.fptr(a.dy, op + " dy") + ", " +
              p.fptr(a.dx, op + " dx") + ", " + i64(a.dx.numel()) + ");\n";
      t.how = "strata's element-wise kernel";
      return t;
    }
    case OpId::max_pool2d_bwd: {
      const auto& a = std::get<ops::MaxPool2dBwdArgs>(c.args);
      const LibraryCall& l = only(c, Kind::pooling_bwd, "cudnnPoolingBackward");
      for (const auto& [v, name] : {std::pair{&a.x, " x"}, {&a.y, " y"}, {&a.dy, " dy"}, {&a.dx, " dx"}})
        require_dense_f32(*v, op + name);
      t.member = "Pooling " + m + ";";
      t.load = "    " + m + " = {legacy.tensor(" + dims_of(a.x) + ", " + strides_of(a.x) + "), legacy.tensor(" +
               dims_of(a.y) + ", " + strides_of(a.y) + "),\n          legacy.pooling(static_cast<cudnnPoolingMode_t>(" +
               i64(l.mode) + "), " + pairs(a.p.kernel_h, a.p.kernel_w) + ", " + pairs(a.p.pad_h, a.p.pad_w) + ", " +
               pairs(a.p.stride_h, a.p.stride_w) + ")};\n";
      t.run = "  CHECK(cudnnPoolingBackward(cudnn, " + m + ".pool, &kOne, " + m + ".y, " + p.ptr(a.y, op + " y") +
              ", " + m + ".y, " + p.ptr(a.dy, op + " dy") + ", " + m + ".x, " + p.ptr(a.x, op + " x") +
              ", &kZero, " + m + ".x, " + p.ptr(a.dx, op + " dx") + "));\n";
      t.how = "cudnnPoolingBackward, mode " + i64(l.mode);
      return t;
    }
    case OpId::softmax_xent_fwd: {
      const auto& a = std::get<ops::SoftmaxXentFwdArgs>(c.args);
      const LibraryCall& l = only(c, Kind::own_kernel, "strata's kernels");
      require_matrix(a.logits, op + " logits");
      p.align(a.logits, op + " logits");  // read in 16-byte packs only where strata's were
      const int64_t rows = a.logits.sizes[0];
      t.run = "  kernels::softmax_xent(stream, " + p.fptr(a.logits, op + " logits") + ", " + i64(rows) + ", " +
              i64(a.logits.sizes[1]) + ", " + i64(a.logits.strides[0]) + ", " + i64(a.logits.strides[1]) + ",\n      " +
              labels_ptr(p, a.labels, op + " labels") + ", " + i64(a.labels.strides[0]) + ", " + i64(a.ignore_index) +
              ", " + p.fptr(a.lse, op + " lse") + ", " + i64(a.lse.strides[0]) + ", " + p.fptr(a.loss, op + " loss") +
              ", " + i64(l.mode) + ",\n      " + scratch.doubles(rows) +
              ", reinterpret_cast<unsigned long long*>(" + scratch.bytes(8) + "));\n";
      t.how = "strata's kernels, " + i64(l.mode) + " threads a row";
      return t;
    }
    case OpId::softmax_xent_bwd: {
      const auto& a = std::get<ops::SoftmaxXentBwdArgs>(c.args);
      only(c, Kind::own_kernel, "strata's kernels");
      require_matrix(a.logits, op + " logits");
      require_matrix(a.dlogits, op + " dlogits");
      p.align(a.logits, op + " logits");
      p.align(a.dlogits, op + " dlogits");
      t.run = "  kernels::softmax_xent_bwd(stream, " + p.fptr(a.logits, op + " logits") + ", " +
              i64(a.logits.sizes[0]) + ", " + i64(a.logits.sizes[1]) + ", " + i64(a.logits.strides[0]) + ", " +
              i64(a.logits.strides[1]) + ",\n      " + p.fptr(a.lse, op + " lse") + ", " + i64(a.lse.strides[0]) +
              ", " + labels_ptr(p, a.labels, op + " labels") + ", " + i64(a.labels.strides[0]) + ", " +
              i64(a.ignore_index) + ", " + p.fptr(a.dloss, op + " dloss") + ", " + scratch.doubles(1) + ",\n      " +
              p.fptr(a.dlogits, op + " dlogits") + ", " + i64(a.dlogits.strides[0]) + ", " +
              i64(a.dlogits.strides[1]) + ");\n";
      t.how = "strata's kernels";
      return t;
    }
    case OpId::fill: {
      const auto& a = std::get<ops::FillArgs>(c.args);
      only(c, Kind::own_kernel, "strata's kernel");
      require_dense_f32(a.y, op + " y");
      t.run = "  kernels::fill(stream, " + p.fptr(a.y, op + " y") + ", " + i64(a.y.numel()) + ", " + num(a.value) +
              ");\n";
      t.how = "strata's element-wise kernel";
      return t;
    }
    case OpId::dropout_fwd: {
      const auto& a = std::get<ops::DropoutFwdArgs>(c.args);
      only(c, Kind::own_kernel, "strata's kernel");
      STRATA_CHECK(!a.rng.defined, "strata_codegen: ", op, " reads its seed from device memory (graph mode's); the "
                   "cuda emitter writes out direct mode's");
      require_dense_f32(a.x, op + " x");
      require_dense_f32(a.y, op + " y");
      t.run = "  kernels::dropout(stream, " + p.fptr(a.x, op + " x") + ", " + p.fptr(a.y, op + " y") + ", " +
              mask_ptr(p, a.mask, op + " mask") + ", " + i64(a.x.numel()) + ",\n      " + counter + ", " + num(a.p) +
              ", " + num(dropout_inv_keep(a.p)) + ");\n";
      t.how = "strata's element-wise kernel, {seed, offset} from the state";
      return t;
    }
    case OpId::dropout_bwd: {
      const auto& a = std::get<ops::DropoutBwdArgs>(c.args);
      only(c, Kind::own_kernel, "strata's kernel");
      require_dense_f32(a.dy, op + " dy");
      require_dense_f32(a.dx, op + " dx");
      t.run = "  kernels::dropout_bwd(stream, " + p.fptr(a.dy, op + " dy") + ", " + mask_ptr(p, a.mask, op + " mask") +
              ", " + p.fptr(a.dx, op + " dx") + ", " + i64(a.dy.numel()) + ", " +
              num(dropout_inv_keep(a.p)) + ");\n";
      t.how = "strata's element-wise kernel";
      return t;
    }
    case OpId::sgd_step:
      STRATA_FAIL("strata_codegen: ", op, ": SGD steps are written by sgd_list_text (internal error)");
    case OpId::batch_norm_fwd: return batch_norm_fwd_text(c, m, p);
    case OpId::batch_norm_bwd: return batch_norm_bwd_text(c, m, p);
    case OpId::global_avg_pool_bwd: {
      const auto& a = std::get<ops::GlobalAvgPoolBwdArgs>(c.args);
      only(c, Kind::own_kernel, "strata's kernel");
      STRATA_CHECK(a.dy.dtype == DType::f32 && a.dy.dim() == 2 && a.dx.dtype == DType::f32 && a.dx.dim() == 4,
                   "strata_codegen: ", op, ": the cuda emitter writes out f32 dy [N, C] and dx [N, C, H, W] only");
      t.run = "  kernels::global_avg_pool_bwd(stream, " + p.fptr(a.dy, op + " dy") + ", " + strides_of(a.dy) + ", " +
              p.fptr(a.dx, op + " dx") + ", " + dims_of(a.dx) + ", " + strides_of(a.dx) + ");\n";
      t.how = "strata's element-wise kernel";
      return t;
    }
    case OpId::space_to_depth_bwd: {
      const auto& a = std::get<ops::SpaceToDepthBwdArgs>(c.args);
      only(c, Kind::own_kernel, "strata's kernel");
      require_dense_f32(a.dy, op + " dy");
      require_dense_f32(a.dx, op + " dx");
      t.run = "  kernels::space_to_depth_bwd(stream, " + p.fptr(a.dy, op + " dy") + ", " + dims_of(a.dy) + ", " +
              strides_of(a.dy) + ", " + p.fptr(a.dx, op + " dx") + ", " + dims_of(a.dx) + ", " + strides_of(a.dx) +
              ", " + i64(a.p.block) + ", " + i64(a.p.pad_h) + ", " + i64(a.p.pad_w) + ");\n";
      t.how = "strata's kernel";
      return t;
    }
    default: return forward_text(c, m, p);
  }
}

bool same_sgd_options(const ops::SgdOptions& a, const ops::SgdOptions& b) {
  return a.lr == b.lr && a.momentum == b.momentum && a.weight_decay == b.weight_decay && a.nesterov == b.nesterov;
}

CallText sgd_list_text(const std::vector<const RecordedCall*>& steps, Places& p) {
  STRATA_CHECK(!steps.empty(), "strata_codegen: an empty list of SGD steps (internal error)");
  const ops::SgdOptions& o = std::get<ops::SgdStepArgs>(steps.front()->args).o;
  std::string entries;
  for (const RecordedCall* c : steps) {
    const auto& a = std::get<ops::SgdStepArgs>(c->args);
    const std::string op = "sgd_step (" + c->layer + ")";
    only(*c, Kind::own_kernel, "strata's kernel");
    STRATA_CHECK(!a.hyper.defined && !a.amp.defined, "strata_codegen: ", op, " follows a schedule or loss scaling "
                 "read from memory; the cuda emitter writes out a fixed learning rate only");
    STRATA_CHECK(same_sgd_options(a.o, o), "strata_codegen: ", op, ": its options differ from the step before it in one list (internal error)");
    require_dense_f32(a.param, op + " param");
    require_dense_f32(a.grad, op + " grad");
    const bool mom = o.momentum != 0.0;
    if (mom) require_dense_f32(a.momentum_buf, op + " momentum_buf");
    entries += "      {" + p.fptr(a.param, op + " param") + ", " + p.fptr(a.grad, op + " grad") + ", " +
               (mom ? p.fptr(a.momentum_buf, op + " momentum_buf") : std::string("nullptr")) + ", " +
               i64(a.param.numel()) + "},  // " + c->layer + "\n";
  }
  CallText t;
  t.run = "  kernels::sgd_list(stream, {\n" + entries + "    }, " + num(o.lr) + ", " + num(o.momentum) + ", " +
          num(o.weight_decay) + ", " + (o.nesterov ? "true" : "false") + ");\n";
  t.how = "strata's multi-tensor SGD update (sgd_update), " + std::to_string(steps.size()) + " parameters";
  return t;
}

}  // namespace strata::codegen::cuda
