// The cuda emitter: a prediction recorded on strata's cuda backend written out as one flat
// forward function of cuDNN, cuBLAS and strata-kernel calls, the same calls with the same
// library choices the backend made, captured once into a CUDA graph at load.
#include "strata/codegen/cuda/emitter.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "strata/backends/cuda/strided.h"
#include "strata/codegen/cuda/call_text.h"
#include "strata/codegen/cuda/support_files.h"
#include "strata/codegen/record_util.h"
#include "strata/codegen/project_files.h"
#include "strata/core/error.h"
#ifdef STRATA_CODEGEN_CUDA_RECORD
#include "strata/codegen/cuda/record.h"
#endif

namespace strata::codegen::cuda {

using backends::cuda::LibraryCall;
using Kind = LibraryCall::Kind;
using ops::OpId;
using ops::TensorView;

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}
std::string dims_of(const TensorView& v) { return ints(std::vector<int64_t>(v.sizes.begin(), v.sizes.end())); }
std::string pairs(int64_t a, int64_t b) {
  return std::string("{") + std::to_string(a) + ", " + std::to_string(b) + "}";
}
std::string strides_of(const TensorView& v) { return ints(std::vector<int64_t>(v.strides.begin(), v.strides.end())); }

void refuse_staging(const RecordedCall& c) {
  for (const LibraryCall& l : c.library) {
    STRATA_CHECK(l.kind != Kind::staged, "strata_codegen: ", ops::op_name(c.op), " (", c.layer, ") went through a "
                 "temporary copy of an operand in strata's cuda backend (a layout or stride cuDNN or cuBLAS does not "
                 "take); the cuda emitter writes out calls on the planned buffers only");
    STRATA_CHECK(l.kind != Kind::split, "strata_codegen: ", ops::op_name(c.op), " (", c.layer, ") ran as several "
                 "calls along the batch (past cuDNN's 32-bit limits); the cuda emitter does not write those out");
    STRATA_CHECK(l.kind != Kind::outside_copy, "strata_codegen: a copy outside any op the cuda backend reports ran "
                 "during or after ", ops::op_name(c.op), " (", c.layer, ") in the step; the cuda emitter cannot "
                 "write it out");
  }
}

void require_dense_f32(const TensorView& v, const std::string& what) {
  STRATA_CHECK(v.dtype == DType::f32 && v.is_contiguous(), "strata_codegen: ", what, " is ", dtype_name(v.dtype),
               " ", v.sizes.str(), " with strides ", v.strides.str(), "; the cuda emitter writes out dense f32 "
               "NCHW (row-major) operands only");
}

namespace {

int64_t alignment(uintptr_t a) {
  int64_t al = 16;
  while (al > 1 && a % static_cast<uintptr_t>(al) != 0) al /= 2;
  return al;
}

}  // namespace

std::string Places::ptr(const TensorView& v, const std::string& what) {
  const BufferRef r = buffers_.locate(v, what);
  switch (r.kind) {
    case BufferKind::arena: return "a + " + std::to_string(r.offset);
    case BufferKind::input_buffer: return "in + " + std::to_string(r.offset);
    case BufferKind::constant:
      return "w + " + std::to_string(buffers_.constants()[static_cast<size_t>(r.constant)].file_offset);
    case BufferKind::input: break;
  }
  STRATA_FAIL("strata_codegen: ", what, " reads the caller's input directly; the cuda emitter expects every call "
              "after the first to read the model's input buffer");
}

std::string Places::fptr(const TensorView& v, const std::string& what) { return "f32(" + ptr(v, what) + ")"; }

int64_t Places::align(const TensorView& v, const std::string& what) {
  const BufferRef r = buffers_.locate(v, what);
  // The arena, the input buffer and the weights come from cudaMalloc (256-byte aligned).
  const int64_t off = r.kind == BufferKind::constant
                          ? buffers_.constants()[static_cast<size_t>(r.constant)].file_offset
                          : r.offset;
  const int64_t here = alignment(static_cast<uintptr_t>(off));
  const int64_t there = alignment(reinterpret_cast<uintptr_t>(v.data));
  STRATA_CHECK(here == there, "strata_codegen: ", what, " was ", there, "-byte aligned in strata and would be ",
               here, "-byte aligned in the generated program; cuDNN's engines depend on it");
  return here;
}

namespace {

std::string identifier(const std::string& s) {
  std::string r;
  for (char ch : s) r += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return r;
}

}  // namespace

const LibraryCall& only(const RecordedCall& c, Kind want, const char* name) {
  refuse_staging(c);
  STRATA_CHECK(c.library.size() == 1 && c.library[0].kind == want, "strata_codegen: ", ops::op_name(c.op), " (",
               c.layer, "): the cuda backend ran it otherwise than by ", name, ", which is all the cuda emitter "
               "writes out for it");
  return c.library[0];
}

namespace {

// strata's converting copy kernel over the indexing the backend makes (backends/cuda/strided.h).
std::string convert(const TensorView& src, const TensorView& dst, const std::string& from, const std::string& to) {
  const auto s = backends::cuda::make_strided_in_memory_order<2>(dst.sizes, {src.strides, dst.strides}, 1);
  std::vector<int64_t> sizes(s.sizes, s.sizes + s.nd), ss(s.strides[0], s.strides[0] + s.nd),
      ds(s.strides[1], s.strides[1] + s.nd);
  return "  {\n    const int64_t sizes[] = " + ints(sizes) + ", src[] = " + ints(ss) + ", dst[] = " + ints(ds) +
         ";\n    kernels::convert(stream, " + std::to_string(s.nd) + ", " + std::to_string(s.n) +
         ", sizes, src, dst, " + from + ", " + to + ");\n  }\n";
}

CallText pool(const RecordedCall& c, const TensorView& x, const TensorView& y, const ops::Pool2dParams& pp,
              const std::string& m, Places& p) {
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  const LibraryCall& l = only(c, Kind::pooling, "cudnnPoolingForward");
  require_dense_f32(x, op + " x");
  require_dense_f32(y, op + " y");
  CallText t;
  t.member = "Pooling " + m + ";";
  t.load = "    " + m + " = {legacy.tensor(" + dims_of(x) + ", " + strides_of(x) + "), legacy.tensor(" + dims_of(y) +
           ", " + strides_of(y) + "),\n          legacy.pooling(static_cast<cudnnPoolingMode_t>(" +
           std::to_string(l.mode) + "), " + pairs(pp.kernel_h, pp.kernel_w) + ", " + pairs(pp.pad_h, pp.pad_w) +
           ", " + pairs(pp.stride_h, pp.stride_w) + ")};\n";
  t.run = "  CHECK(cudnnPoolingForward(cudnn, " + m + ".pool, &kOne, " + m + ".x, " + p.ptr(x, op + " x") +
          ", &kZero, " + m + ".y, " + p.ptr(y, op + " y") + "));\n";
  t.how = "cudnnPoolingForward, mode " + std::to_string(l.mode);
  return t;
}

}  // namespace

std::string gemm_text(const LibraryCall& gemm, std::initializer_list<std::pair<const TensorView*, const char*>> views,
                      const std::string& op, Places& p) {
  // cuBLAS chooses its kernel by its operands' alignment too: the program's must be strata's.
  const auto operand = [&](const void* ptr, const char* role) -> std::string {
    for (const auto& [v, name] : views)
      if (v->data == ptr) {
        p.align(*v, op + " " + name);
        return p.ptr(*v, op + " " + name);
      }
    STRATA_FAIL("strata_codegen: ", op, ": cuBLAS's ", role, " is none of the call's operands (internal error)");
  };
  const auto trans = [](int o) { return o == 0 ? "CUBLAS_OP_N" : "CUBLAS_OP_T"; };
  STRATA_CHECK(gemm.op_a <= 1 && gemm.op_b <= 1, "strata_codegen: ", op, ": an unexpected cuBLAS operation");
  STRATA_CHECK(gemm.beta == 0.f || gemm.beta == 1.f, "strata_codegen: ", op, ": an unexpected GEMM beta");
  return "  CHECK(cublasGemmEx(cublas, " + std::string(trans(gemm.op_a)) + ", " + trans(gemm.op_b) + ", " +
         std::to_string(gemm.m) + ", " + std::to_string(gemm.n) + ", " + std::to_string(gemm.k) +
         ", &kOne,\n                     " + operand(gemm.a, "A") + ", CUDA_R_32F, " + std::to_string(gemm.lda) +
         ", " + operand(gemm.b, "B") + ", CUDA_R_32F, " + std::to_string(gemm.ldb) + ",\n                     " +
         (gemm.beta == 0.f ? "&kZero, " : "&kOne, ") + operand(gemm.c, "C") + ", CUDA_R_32F, " +
         std::to_string(gemm.ldc) + ", static_cast<cublasComputeType_t>(" + std::to_string(gemm.mode) +
         "), CUBLAS_GEMM_DEFAULT));\n";
}

namespace {

CallText linear(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::LinearFwdArgs>(c.args);
  const std::string op = "linear_fwd (" + c.layer + ")";
  refuse_linear_extras(a, op, "cuda");
  refuse_staging(c);
  require_dense_f32(a.x, op + " x");
  require_dense_f32(a.w, op + " w");
  require_dense_f32(a.y, op + " y");
  CallText t;
  if (!c.library.empty() && c.library[0].kind == Kind::gemv) {  // at most 4 rows: strata's own kernel
    const LibraryCall& l = only(c, Kind::gemv, "strata's few-rows linear kernel");
    p.align(a.x, op + " x");  // its loads are 16 bytes wide only where strata's were
    p.align(a.w, op + " w");
    const auto i = [](int64_t v) { return std::to_string(v); };
    t.run = "  kernels::gemv(stream, " + i(l.mode) + ", " + p.fptr(a.x, op + " x") + ", " + p.fptr(a.w, op + " w") +
            ", " + (a.b.defined ? p.fptr(a.b, op + " bias") : std::string("nullptr")) + ", " +
            p.fptr(a.y, op + " y") + ",\n               " + i(a.y.sizes[0]) + ", " + i(a.y.sizes[1]) + ", " +
            i(a.x.sizes[1]) + ", " + i(a.x.strides[0]) + ", " + i(a.w.strides[0]) + ", " +
            i(a.b.defined ? a.b.strides[0] : 0) + ", " + i(a.y.strides[0]) + ", " + i(a.y.strides[1]) + ");\n";
    t.how = "strata's few-rows linear kernel, " + i(l.mode) + " elements a load";
    return t;
  }
  const LibraryCall* gemm = nullptr;
  for (const LibraryCall& l : c.library) {
    if (l.kind == Kind::convert) {
      // y = the bias broadcast along the rows, then y += x w^T through beta = 1 (linear.cu).
      STRATA_CHECK(a.b.defined && a.b.dtype == DType::f32, "strata_codegen: ", op, ": an unexpected copy");
      TensorView bb = a.b;
      bb.sizes = a.y.sizes;
      bb.strides = Shape{0, a.b.strides[0]};
      t.run += convert(bb, a.y, p.fptr(a.b, op + " bias"), p.fptr(a.y, op + " y"));
    } else {
      STRATA_CHECK(l.kind == Kind::gemm && !gemm, "strata_codegen: ", op, ": the cuda backend ran it otherwise "
                   "than by a bias copy and one cublasGemmEx, which is all the cuda emitter writes out for it");
      gemm = &l;
    }
  }
  STRATA_CHECK(gemm, "strata_codegen: ", op, ": no GEMM reported (internal error)");
  t.run += gemm_text(*gemm, {{&a.x, "x"}, {&a.w, "w"}, {&a.y, "y"}}, op, p);
  t.how = std::string(a.b.defined ? "the bias broadcast by strata's copy kernel, then " : "") +
          "cublasGemmEx (CUBLAS_GEMM_DEFAULT)";
  return t;
}

CallText elementwise(const RecordedCall& c, Places& p, const std::string& m) {
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  CallText t;
  if (const auto* a = std::get_if<ops::ReluFwdArgs>(&c.args)) {
    require_dense_f32(a->x, op + " x");
    require_dense_f32(a->y, op + " y");
    refuse_staging(c);
    if (!c.library.empty() && c.library[0].kind == Kind::activation) {
      only(c, Kind::activation, "cudnnActivationForward");
      t.member = "Activation " + m + ";";
      t.load = "    " + m + " = {legacy.tensor(" + dims_of(a->x) + ", " + strides_of(a->x) + "), legacy.tensor(" +
               dims_of(a->y) + ", " + strides_of(a->y) + "), legacy.relu()};\n";
      t.run = "  CHECK(cudnnActivationForward(cudnn, " + m + ".act, &kOne, " + m + ".x, " + p.ptr(a->x, op + " x") +
              ", &kZero, " + m + ".y, " + p.ptr(a->y, op + " y") + "));\n";
      t.how = "cudnnActivationForward";
      return t;
    }
    only(c, Kind::own_kernel, "strata's kernel");
    t.run = "  kernels::relu(stream, " + p.fptr(a->x, op + " x") + ", " + p.fptr(a->y, op + " y") + ", " +
            std::to_string(a->y.numel()) + ");\n";
    t.how = "strata's element-wise kernel";
    return t;
  }
  if (const auto* a = std::get_if<ops::AddArgs>(&c.args)) {
    only(c, Kind::own_kernel, "strata's kernel");
    for (const TensorView* v : {&a->a, &a->b, &a->y}) require_dense_f32(*v, op);
    t.run = "  kernels::add(stream, " + p.fptr(a->a, op + " a") + ", " + p.fptr(a->b, op + " b") + ", " +
            p.fptr(a->y, op + " y") + ", " + std::to_string(a->y.numel()) + ");\n";
    t.how = "strata's element-wise kernel";
    return t;
  }
  const auto& a = std::get<ops::GlobalAvgPoolFwdArgs>(c.args);
  const LibraryCall& l = only(c, Kind::gap_kernel, "strata's kernel");
  STRATA_CHECK(a.x.dtype == DType::f32 && a.y.dtype == DType::f32, "strata_codegen: ", op,
               ": non-f32 global average pooling is not written out by the cuda emitter");
  // strata's kernel for the layout it saw (mode 1: channels 1 apart, which an NCHW x of 1x1 planes is too).
  const bool nhwc = l.mode == 1;
  t.run = std::string("  kernels::global_avg_pool") + (nhwc ? "_nhwc" : "") + "(stream, " + p.fptr(a.x, op + " x") +
          ", " + dims_of(a.x) + ", " + strides_of(a.x) + ", " + p.fptr(a.y, op + " y") + ", " + strides_of(a.y) +
          ");\n";
  t.how = nhwc ? "strata's kernel, one thread per (n, c)" : "strata's kernel, one warp per plane";
  return t;
}

CallText space_to_depth(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::SpaceToDepthArgs>(c.args);
  const std::string op = "space_to_depth_fwd (" + c.layer + ")";
  only(c, Kind::own_kernel, "strata's kernel");
  require_dense_f32(a.x, op + " x");
  require_dense_f32(a.y, op + " y");
  CallText t;
  t.run = "  kernels::space_to_depth(stream, " + p.fptr(a.x, op + " x") + ", " + dims_of(a.x) + ", " +
          strides_of(a.x) + ", " + p.fptr(a.y, op + " y") + ", " + dims_of(a.y) + ", " + strides_of(a.y) + ", " +
          std::to_string(a.p.block) + ", " + std::to_string(a.p.pad_h) + ", " + std::to_string(a.p.pad_w) + ");\n";
  t.how = "strata's kernel";
  return t;
}

// A copy after the first (the first is the input's, in run()).
CallText copy(const RecordedCall& c, Places& p) {
  const auto& a = std::get<ops::CopyArgs>(c.args);
  const std::string op = "copy (" + c.layer + ")";
  refuse_staging(c);
  STRATA_CHECK(a.x.dtype == DType::f32 && a.y.dtype == DType::f32, "strata_codegen: ", op, " converts ",
               dtype_name(a.x.dtype), " to ", dtype_name(a.y.dtype), "; the cuda emitter writes out f32 only");
  CallText t;
  if (c.library.empty()) {
    t.how = "nothing to do: the source is the destination";
    return t;
  }
  STRATA_CHECK(c.library.size() == 1, "strata_codegen: ", op, ": more than one library call (internal error)");
  if (c.library[0].kind == Kind::memcpy) {
    t.run = "  CHECK(cudaMemcpyAsync(" + p.ptr(a.y, op + " y") + ", " + p.ptr(a.x, op + " x") + ", " +
            std::to_string(c.library[0].m) + ", cudaMemcpyDeviceToDevice, stream));\n";
    t.how = "cudaMemcpyAsync";
    return t;
  }
  STRATA_CHECK(c.library[0].kind == Kind::convert, "strata_codegen: ", op, ": an unexpected library call");
  t.run = convert(a.x, a.y, p.fptr(a.x, op + " x"), p.fptr(a.y, op + " y"));
  t.how = "strata's converting copy kernel";
  return t;
}

}  // namespace

std::string io_of(const RecordedCall& c) {
  std::string io;
  std::visit([&](const auto& args) {
    if constexpr (requires { args.x; args.y; }) io = " " + args.x.sizes.str() + " -> " + args.y.sizes.str();
  }, c.args);
  return io;
}

std::string member_name(size_t i, const RecordedCall& c) {
  return std::string("c") + std::to_string(i) + "_" + identifier(c.layer);
}

CallText forward_text(const RecordedCall& c, const std::string& m, Places& places) {
  if (is_gpt_call(c)) return gpt_text(c, places);
  switch (c.op) {
    case OpId::conv2d_fwd: return conv_text(c, m, places);
    case OpId::linear_fwd: return linear(c, places);
    case OpId::relu_fwd:
    case OpId::add:
    case OpId::global_avg_pool_fwd: return elementwise(c, places, m);
    case OpId::max_pool2d_fwd: {
      const auto& a = std::get<ops::MaxPool2dFwdArgs>(c.args);
      return pool(c, a.x, a.y, a.p, m, places);
    }
    case OpId::avg_pool2d_fwd: {
      const auto& a = std::get<ops::AvgPool2dFwdArgs>(c.args);
      return pool(c, a.x, a.y, a.p, m, places);
    }
    case OpId::copy: return copy(c, places);
    case OpId::space_to_depth_fwd: return space_to_depth(c, places);
    default:
      STRATA_FAIL("strata_codegen: op ", ops::op_name(c.op), " (", c.layer, ") is not supported by the cuda "
                  "emitter (it writes out conv2d_fwd, linear_fwd, relu_fwd, add, max_pool2d_fwd, avg_pool2d_fwd, "
                  "global_avg_pool_fwd, space_to_depth_fwd and copy, in f32; for a GPT also index_select, "
                  "layer_norm_fwd, attention_fwd, unary_fwd (GELU) and bmm",
                  places.step().training ? "; in a training step also the backward of those LeNet-5 and ResNet run, "
                                           "batch norm in training, the loss, dropout and SGD" : "",
                  ")");
  }
}

std::vector<GeneratedFile> emit_project(const RecordedStep& step, BufferMap& buffers) {
  if (step.training) return emit_train_project(step, buffers);
  STRATA_CHECK((step.input.dtype == DType::f32 || step.input.dtype == DType::i64) && step.output.dtype == DType::f32,
               "strata_codegen: the model takes ",
               dtype_name(step.input.dtype), " and returns ", dtype_name(step.output.dtype),
               "; the cuda emitter writes out f32 models only");
  Places places(step, buffers);
  // The first call copies the caller's input into the model's planned input buffer: run() does.
  const RecordedCall& first = step.calls.front();
  const auto& in_copy = std::get<ops::CopyArgs>(first.args);
  STRATA_CHECK(first.library.size() == 1 && first.library[0].kind == Kind::memcpy && in_copy.x.is_contiguous() &&
                   in_copy.y.is_contiguous() && in_copy.y.dtype == step.input.dtype,
               "strata_codegen: the input's copy into the planned buffer was not one plain copy to the device");
  const std::string input_at = places.ptr(in_copy.y, "the model's input buffer");
  std::vector<CallText> texts;
  for (size_t i = 1; i < step.calls.size(); ++i) {
    const RecordedCall& c = step.calls[i];
    texts.push_back(forward_text(c, member_name(i, c), places));
    CallText& t = texts.back();
    t.comment = c.layer + ": " + std::string(ops::op_name(c.op)) + io_of(c) + " (" + t.how + ")";
  }
  const std::string output_at = places.ptr(step.output, "the model's output");
  return assemble(step, buffers, texts, input_at, output_at);
}

namespace {

class CudaEmitter final : public Emitter {
 public:
  std::string_view backend() const override { return "cuda"; }
  RecordedStep record(nn::Model& model, const Tensor& x, std::map<const void*, std::string>& names) override {
#ifdef STRATA_CODEGEN_CUDA_RECORD
    return record_predict(model, x, names);
#else
    (void)model, (void)x, (void)names;
    STRATA_FAIL("strata_codegen: this strata was built without the cuda backend, so the cuda emitter cannot "
                "record a model (build with -DSTRATA_WITH_CUDA=ON and run on a GPU)");
#endif
  }
  RecordedStep record_train(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                            std::map<const void*, std::string>& names) override {
#ifdef STRATA_CODEGEN_CUDA_RECORD
    return record_train_step(model, x, labels, opt, names);
#else
    (void)model, (void)x, (void)labels, (void)opt, (void)names;
    STRATA_FAIL("strata_codegen: this strata was built without the cuda backend, so the cuda emitter cannot "
                "record a training step (build with -DSTRATA_WITH_CUDA=ON and run on a GPU)");
#endif
  }
  std::vector<GeneratedFile> emit(const RecordedStep& step, BufferMap& buffers) override {
    return emit_project(step, buffers);
  }
  // The state as strata's model holds it now, read from the device.
  std::string state_file(const RecordedStep& step, const BufferMap& buffers, int64_t steps_done) override {
#ifdef STRATA_CODEGEN_CUDA_RECORD
    RecordedStep now = step;
    for (const Constant& k : buffers.constants()) now.host_bytes[k.data] = device_bytes(k.data, k.bytes, step.device);
    return train_state_file(now, buffers, steps_done);
#else
    return train_state_file(step, buffers, steps_done);
#endif
  }
};

}  // namespace

std::unique_ptr<Emitter> make_cuda_emitter() { return std::make_unique<CudaEmitter>(); }

}  // namespace strata::codegen::cuda
