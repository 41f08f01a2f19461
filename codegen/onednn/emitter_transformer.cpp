#include "strata/codegen/onednn/emitter_parts.h"

#include <algorithm>
#include <sstream>

#include "strata/backends/cpu/threads.h"
#include "strata/codegen/record_util.h"
#include "strata/core/error.h"
#include "strata/ops/table/gemm_layout.h"
#include "strata/ops/table/pointwise.h"

// The onednn emitter's GPT forward: the calls the onednn backend runs for a GPT's prediction that
// are not oneDNN primitives. Its lookups, layer norms, attention, element-wise formulas and adds are
// strata's own loops (backends/cpu), written out as the same code (the codegen:begin blocks of
// transformer_ops.h, pointwise.def and elementwise.h, which model.cpp carries); its output
// projection is one oneDNN sgemm per batch, called as the backend calls it (onednn/tensor_ops.cpp).
// The linear layers are emitter.cpp's matmul primitives: a linear's GELU or residual epilogue is
// composed by the backend of a plain linear and these ops (backends/api/linear_epilogue.h), and
// recorded as those.
namespace strata::codegen::onednn::detail {

namespace {

std::string i64(int64_t v) { return "int64_t{" + std::to_string(v) + "}"; }

// "{s0, s1, ...}" of a view's strides or sizes, as an int64_t array's initialiser.
std::string dims_of(const Shape& s) { return ints(std::vector<int64_t>(s.begin(), s.end())); }

// The OpenMP clause of a loop strata runs over the pool with its thread rule (the results do not
// depend on the thread count; the rule keeps the program's speed strata's).
std::string omp_for(const backends::loops::Work& w) {
  return "#ifdef _OPENMP\n#pragma omp parallel for schedule(static) num_threads(threads_of(" + std::to_string(w.units) +
         ", " + std::to_string(w.grain) + "))\n#endif\n";
}

// A call that runs no primitive: its run block only.
CallText plain_loop(const std::ostringstream& run) {
  CallText t;
  t.run = run.str();
  return t;
}

}  // namespace

bool is_transformer_backward_op(OpId op) {
  switch (op) {
    case OpId::layer_norm_bwd:
    case OpId::attention_bwd:
    case OpId::unary_bwd:
    case OpId::index_add:
    case OpId::reduce_dims: return true;
    default: return false;
  }
}

bool is_transformer_op(OpId op) {
  switch (op) {
    case OpId::index_select:
    case OpId::layer_norm_fwd:
    case OpId::attention_fwd:
    case OpId::unary_fwd:
    case OpId::bmm:
    case OpId::fill:
    case OpId::add: return true;
    default: return false;
  }
}

bool runs_transformer_ops(const RecordedStep& step) {
  return std::any_of(step.calls.begin(), step.calls.end(),
                     [](const RecordedCall& c) { return is_transformer_op(c.op); });
}

CallText OneDnnEmitter::transformer_call(const RecordedCall& c, const RecordedStep& step, BufferMap& b) {
  switch (c.op) {
    case OpId::index_select: return index_select(c, step, b);
    case OpId::layer_norm_fwd: return layer_norm(c, b);
    case OpId::attention_fwd: return attention(c, b);
    case OpId::unary_fwd: return unary_loop(c, b);
    case OpId::bmm: return bmm(c, b);
    case OpId::add: return c.primitive ? train_primitive(c, b) : add_loop(c, b);
    // The zero rows of a padded vocabulary's weight copy: the training step's fill (fill_dense).
    case OpId::fill: return train_call(c, step, b, -1);
    default: break;
  }
  STRATA_FAIL("strata_codegen: op ", ops::op_name(c.op), " (", c.layer, ") is not a GPT op the onednn emitter writes "
              "out (internal error)");
}

// y's rows = x's rows at the indices: bytes moved, as strata's loop moves them (tensor_ops.h). The
// model's input (token ids) is checked at each run, as strata's loop checks it; indices that are
// constants of the model (GPT's positions) were checked here.
CallText OneDnnEmitter::index_select(const RecordedCall& c, const RecordedStep& step, BufferMap& b) {
  const auto& a = std::get<ops::IndexSelectArgs>(c.args);
  const std::string op = "index_select (" + c.layer + ")";
  require_f32(a.x, op);
  const int64_t rows = a.x.sizes[0], width = a.x.numel() / std::max<int64_t>(rows, 1), n = a.index.numel();
  STRATA_CHECK(a.dim == 0 && a.x.dim() == 2 && a.x.is_contiguous() && a.y.is_contiguous() &&
                   a.y.numel() == n * width && a.index.dtype == DType::i64 && a.index.dim() == 1,
               "strata_codegen: ", op, " looks up ", shape(a.index), " ", dtype_name(a.index.dtype), " indices in dim ",
               a.dim, " of ", shape(a.x),
               "; the onednn emitter writes out the rows of a dense table by i64 indices only");
  const BufferRef ids = b.locate(a.index, op + " argument index");
  const std::string table = where(b, a.x, op + " argument x", BufferKind::constant);
  const std::string y = where(b, a.y, op + " argument y", BufferKind::arena);
  const int64_t row_bytes = width * 4;
  std::ostringstream r;
  if (ids.kind == BufferKind::constant) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = static_cast<const int64_t*>(a.index.data)[i * a.index.strides[0]];
      STRATA_CHECK(v >= 0 && v < rows, "strata_codegen: ", op, ": index ", i, " is ", v, ", out of range [0, ", rows,
                   ")");
    }
    r << "    const int64_t* ids = reinterpret_cast<const int64_t*>(" << state(b, a.index, op + " argument index")
      << ");  // constant, in range\n";
  } else {
    STRATA_CHECK(a.index.data == step.input_buffer.data || ids.kind == BufferKind::arena, "strata_codegen: ", op,
                 " reads its indices from ", kind_name(ids.kind), " (internal error)");
    r << "    const int64_t* ids = reinterpret_cast<const int64_t*>(" << state(b, a.index, op + " argument index")
      << ");\n";
  }
  r << "    const std::byte* table = " << table << ";\n    std::byte* y = " << y << ";\n";
  r << "    for (int64_t i = 0; i < " << n << "; ++i) {\n";
  r << "      const int64_t id = ids[i * " << a.index.strides[0] << "];\n";
  if (ids.kind != BufferKind::constant)
    r << "      if (id < 0 || id >= " << rows << ")\n        throw std::invalid_argument(\"token \" + std::to_string(i) + "
      << "\" is \" + std::to_string(id) + \", out of range [0, " << rows << ")\");\n";
  r << "      std::memcpy(y + i * " << row_bytes << ", table + id * " << row_bytes << ", " << row_bytes
    << ");\n    }\n";
  return plain_loop(r);
}

// Layer norm over the rows of x [N, C] (layer_norm_row: transformer_ops.h), the rows over the pool.
CallText OneDnnEmitter::layer_norm(const RecordedCall& c, BufferMap& b) {
  const auto& a = std::get<ops::LayerNormFwdArgs>(c.args);
  const std::string op = "layer_norm_fwd (" + c.layer + ")";
  STRATA_CHECK(a.x.dim() == 2 && a.y.dim() == 2, "strata_codegen: ", op, " normalises ", shape(a.x),
               " (internal error: the op takes rows [N, C])");
  const int64_t n = a.x.sizes[0], cols = a.x.sizes[1];
  auto vec = [&](const TensorView& v, const char* arg) {
    if (!v.defined) return std::string("Strided1<const float>{nullptr, 0}");
    return "Strided1<const float>{" + fptr(b, v, op + " argument " + arg, false) + ", " + i64(v.strides[0]) + "}";
  };
  std::ostringstream r;
  r << "    const float* x = " << fptr(b, a.x, op + " argument x", false) << ";\n";
  r << "    float* y = " << fptr(b, a.y, op + " argument y", true) << ";\n";
  r << "    float* mean = " << fptr(b, a.mean, op + " argument mean", true) << ";\n";
  r << "    float* rstd = " << fptr(b, a.rstd, op + " argument rstd", true) << ";\n";
  r << "    const Strided1<const float> gamma = " << vec(a.weight, "weight") << ", beta = " << vec(a.bias, "bias")
    << ";\n";
  r << omp_for(backends::loops::elementwise_work(n * cols));
  r << "    for (int64_t i = 0; i < " << n << "; ++i)\n";
  r << "      layer_norm_row<float>(Strided1<const float>{x + i * " << a.x.strides[0] << ", " << i64(a.x.strides[1])
    << "}, gamma, beta, Strided1<float>{y + i * " << a.y.strides[0] << ", " << i64(a.y.strides[1]) << "}, " << i64(cols)
    << ", " << num(a.eps) << ", mean + i * " << a.mean.strides[0] << ", rstd + i * " << a.rstd.strides[0] << ");\n";
  return plain_loop(r);
}

// Causal attention over q, k, v [B, H, T, D] (views of the QKV projection's output): each (batch,
// head) pair's queries by attention_pair (transformer_ops.h), the pairs over the pool.
CallText OneDnnEmitter::attention(const RecordedCall& c, BufferMap& b) {
  const auto& a = std::get<ops::AttentionFwdArgs>(c.args);
  const std::string op = "attention_fwd (" + c.layer + ")";
  STRATA_CHECK(!a.kv_len.defined && !a.k_new.defined, "strata_codegen: ", op, " reads a key/value cache; the onednn "
               "emitter writes out attention over a whole sequence only (no cache)");
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1], tq = a.q.sizes[2], D = a.q.sizes[3], tk = a.k.sizes[2];
  std::ostringstream r;
  struct Operand {
    const TensorView* v;
    const char* name;
    bool writes;
  };
  for (const Operand& o : {Operand{&a.q, "q", false}, Operand{&a.k, "k", false}, Operand{&a.v, "v", false},
                           Operand{&a.y, "y", true}, Operand{&a.lse, "lse", true}})
    r << "    " << (o.writes ? "float* " : "const float* ") << o.name << " = "
      << fptr(b, *o.v, op + " argument " + o.name, o.writes) << ";\n";
  r << "    const AttentionDims dims{" << tq << ", " << tk << ", " << tk << ", " << D << ", "
    << (a.causal ? "true" : "false") << "};\n";
  r << omp_for(backends::loops::product_work(B * H * tq * tk * D * 2));
  r << "    for (int64_t bh = 0; bh < " << B * H << "; ++bh) {\n      const int64_t n = bh / " << H << ", h = bh % " << H
    << ";\n";
  auto pair = [&](const TensorView& v, const char* name, const char* type) {
    return std::string("Strided2<") + type + ">{" + name + " + n * " + std::to_string(v.strides[0]) + " + h * " +
           std::to_string(v.strides[1]) + ", " + std::to_string(v.strides[2]) + ", " + std::to_string(v.strides[3]) + "}";
  };
  r << "      attention_pair<float>(" << pair(a.q, "q", "const float") << ",\n                            "
    << pair(a.k, "k", "const float") << ",\n                            " << pair(a.v, "v", "const float")
    << ",\n                            " << pair(a.y, "y", "float") << ",\n                            Strided1<float>{lse + n * "
    << a.lse.strides[0] << " + h * " << a.lse.strides[1] << ", " << a.lse.strides[2] << "}, dims, static_cast<float>("
    << num(a.scale) << "));\n    }\n";
  return plain_loop(r);
}

// An element-wise formula y = f(x) over dense buffers: the row of pointwise.def (pointwise::<name>).
CallText OneDnnEmitter::unary_loop(const RecordedCall& c, BufferMap& b) {
  const auto& a = std::get<ops::UnaryFwdArgs>(c.args);
  const std::string op = "unary_fwd " + std::string(ops::unary_name(a.fn)) + " (" + c.layer + ")";
  STRATA_CHECK(dense_same_layout(a.x, a.y), "strata_codegen: ", op, " reads ", shape(a.x),
               " and writes in another layout; the onednn emitter writes out the plain loop for one layout only");
  std::ostringstream r;
  r << "    const float* x = " << fptr(b, a.x, op + " argument x", false) << ";\n";
  r << "    float* y = " << fptr(b, a.y, op + " argument y", true) << ";\n";
  r << "    for (int64_t i = 0; i < " << a.x.numel() << "; ++i) y[i] = pointwise::" << ops::unary_name(a.fn)
    << "(x[i], " << num(a.p0) << ", " << num(a.p1) << ");\n";
  return plain_loop(r);
}

// y = a + b below the backend's primitive threshold: strata's add_of (elementwise.h) per element,
// over any strides (GPT's position embeddings are read broadcast over the batch, stride 0).
CallText OneDnnEmitter::add_loop(const RecordedCall& c, BufferMap& b) {
  const auto& a = std::get<ops::AddArgs>(c.args);
  const std::string op = "add (" + c.layer + ")";
  STRATA_CHECK(a.a.sizes == a.y.sizes && a.b.sizes == a.y.sizes, "strata_codegen: ", op, " adds ", shape(a.a), " and ",
               shape(a.b), " into ", shape(a.y), " (internal error: the op takes one shape)");
  std::ostringstream r;
  r << "    const float* x0 = " << fptr(b, a.a, op + " argument a", false) << ";\n";
  r << "    const float* x1 = " << fptr(b, a.b, op + " argument b", false) << ";\n";
  r << "    float* y = " << fptr(b, a.y, op + " argument y", true) << ";\n";
  if (dense_same_layout(a.a, a.y) && dense_same_layout(a.b, a.y)) {
    r << "    for (int64_t i = 0; i < " << a.y.numel() << "; ++i) y[i] = add_of(x0[i], x1[i]);\n";
  } else {
    const int d = a.y.dim();
    r << "    const int64_t sizes[" << d << "] = " << dims_of(a.y.sizes) << ";\n";
    r << "    const int64_t strides[3][" << d << "] = {" << dims_of(a.a.strides) << ", " << dims_of(a.b.strides) << ", "
      << dims_of(a.y.strides) << "};\n";
    r << "    for_each_offset(sizes, strides, [&](const int64_t (&o)[3]) { y[o[2]] = add_of(x0[o[0]], x1[o[1]]); });\n";
  }
  return plain_loop(r);
}

// y[i] = alpha a[i] b[i]: one oneDNN sgemm per batch, each operand read in the layout its strides
// give (ops/table/gemm_layout.h), as the backend calls it. GPT's output projection: the rows of x
// against wte's weight read transposed in place.
CallText OneDnnEmitter::bmm(const RecordedCall& c, BufferMap& b) {
  const auto& a = std::get<ops::BmmArgs>(c.args);
  const std::string op = "bmm (" + c.layer + ")";
  const auto la = ops::gemm_layout(a.a), lb = ops::gemm_layout(a.b);
  STRATA_CHECK(la && lb, "strata_codegen: ", op, " reads an operand with no GEMM layout (internal error)");
  const int64_t B = a.y.sizes[0], M = a.y.sizes[1], N = a.y.sizes[2], K = a.a.sizes[2];
  const int64_t ldc = std::max<int64_t>(a.y.strides[1], std::max<int64_t>(N, 1));
  const BufferRef wb = b.locate(a.b, op + " argument b");
  std::ostringstream r;
  if (wb.kind == BufferKind::constant)
    r << "    // b: " << b.constants()[static_cast<size_t>(wb.constant)].name << ", read in place\n";
  r << "    const float* pa = " << fptr(b, a.a, op + " argument a", false) << ";\n";
  r << "    const float* pb = " << fptr(b, a.b, op + " argument b", false) << ";\n";
  r << "    float* y = " << fptr(b, a.y, op + " argument y", true) << ";\n";
  r << "    for (int64_t i = 0; i < " << B << "; ++i) {\n";
  r << "      const dnnl_status_t st = dnnl_sgemm('" << (la->trans ? 'T' : 'N') << "', '" << (lb->trans ? 'T' : 'N')
    << "', " << M << ", " << N << ", " << K << ", static_cast<float>(" << num(a.alpha) << "), pa + i * "
    << a.a.strides[0] << ", " << la->ld << ", pb + i * " << a.b.strides[0] << ", " << lb->ld << ", 0.0f, y + i * "
    << a.y.strides[0] << ", " << ldc << ");\n";
  r << "      if (st != dnnl_success) throw std::runtime_error(\"" << op
    << ": dnnl_sgemm failed with status \" + std::to_string(static_cast<int>(st)));\n    }\n";
  return plain_loop(r);
}

// A GPT's training step: the backward of the ops above, as the backend runs it (strata's loops,
// whose arithmetic model.cpp carries as their codegen:begin blocks), and the copy that lays wte's
// gradient out from the output projection's [C, V] product.
CallText OneDnnEmitter::transformer_backward(const RecordedCall& c, BufferMap& b) {
  const std::string op = std::string(ops::op_name(c.op)) + " (" + c.layer + ")";
  auto in = [&](const TensorView& v, const char* name) { return fptr(b, v, op + " argument " + name, false); };
  auto out = [&](const TensorView& v, const char* name) { return fptr(b, v, op + " argument " + name, true); };
  std::ostringstream r;
  if (const auto* a = std::get_if<ops::LayerNormBwdArgs>(&c.args)) {
    STRATA_CHECK(a->x.dim() == 2 && a->dy.dim() == 2, "strata_codegen: ", op, " normalises ", shape(a->x),
                 " (internal error: the op takes rows [N, C])");
    const int64_t n = a->x.sizes[0], cols = a->x.sizes[1];
    auto vec = [&](const TensorView& v, const char* name, bool writes) {
      const std::string type = writes ? "float" : "const float";
      if (!v.defined) return "Strided1<" + type + ">{nullptr, 0}";
      return "Strided1<" + type + ">{" + fptr(b, v, op + " argument " + name, writes) + ", " + i64(v.strides[0]) + "}";
    };
    r << "    const float* x = " << in(a->x, "x") << ";\n    const float* dy = " << in(a->dy, "dy") << ";\n";
    r << "    const float* mean = " << in(a->mean, "mean") << ";\n    const float* rstd = " << in(a->rstd, "rstd") << ";\n";
    if (a->dx.defined) {
      r << "    float* dx = " << out(a->dx, "dx") << ";\n";
      r << "    const Strided1<const float> gamma = " << vec(a->weight, "weight", false) << ";\n";
      r << omp_for(backends::loops::elementwise_work(n * cols));
      r << "    for (int64_t i = 0; i < " << n << "; ++i)\n";
      r << "      layer_norm_bwd_row<float>(Strided1<const float>{x + i * " << a->x.strides[0] << ", "
        << i64(a->x.strides[1]) << "}, gamma, Strided1<const float>{dy + i * " << a->dy.strides[0] << ", "
        << i64(a->dy.strides[1]) << "},\n                                Strided1<float>{dx + i * " << a->dx.strides[0]
        << ", " << i64(a->dx.strides[1]) << "}, " << i64(cols) << ", mean[i * " << a->mean.strides[0] << "], rstd[i * "
        << a->rstd.strides[0] << "]);\n";
    }
    if (a->dweight.defined || a->dbias.defined)
      r << "    layer_norm_param_grads<float>(Strided2<const float>{x, " << a->x.strides[0] << ", " << a->x.strides[1]
        << "}, Strided2<const float>{dy, " << a->dy.strides[0] << ", " << a->dy.strides[1]
        << "},\n                                  Strided1<const float>{mean, " << a->mean.strides[0]
        << "}, Strided1<const float>{rstd, " << a->rstd.strides[0] << "}, " << i64(n) << ", " << i64(cols)
        << ",\n                                  " << vec(a->dweight, "dweight", true) << ", "
        << vec(a->dbias, "dbias", true) << ");\n";
  } else if (const auto* a = std::get_if<ops::AttentionBwdArgs>(&c.args)) {
    STRATA_CHECK(!a->kv_len.defined, "strata_codegen: ", op, " reads a key/value cache's length; the onednn emitter "
                 "writes out attention over a whole sequence only (no cache)");
    const int64_t B = a->q.sizes[0], H = a->q.sizes[1], tq = a->q.sizes[2], D = a->q.sizes[3], tk = a->k.sizes[2];
    struct Operand {
      const TensorView* v;
      const char* name;
      bool writes;
    };
    const Operand operands[] = {{&a->q, "q", false},   {&a->k, "k", false},    {&a->v, "v", false},
                                {&a->y, "y", false},   {&a->dy, "dy", false},  {&a->lse, "lse", false},
                                {&a->delta, "delta", true}, {&a->dq, "dq", true}, {&a->dk, "dk", true},
                                {&a->dv, "dv", true}};
    for (const Operand& o : operands)
      r << "    " << (o.writes ? "float* " : "const float* ") << o.name << " = "
        << fptr(b, *o.v, op + " argument " + o.name, o.writes) << ";\n";
    r << "    const AttentionDims dims{" << tq << ", " << tk << ", " << tk << ", " << D << ", "
      << (a->causal ? "true" : "false") << "};\n";
    r << omp_for(backends::loops::product_work(B * H * tq * tk * D * 4));
    r << "    for (int64_t bh = 0; bh < " << B * H << "; ++bh) {\n      const int64_t n = bh / " << H << ", h = bh % " << H
      << ";\n";
    auto pair = [&](const Operand& o) {
      return std::string("Strided2<") + (o.writes ? "float" : "const float") + ">{" + o.name + " + n * " +
             std::to_string(o.v->strides[0]) + " + h * " + std::to_string(o.v->strides[1]) + ", " +
             std::to_string(o.v->strides[2]) + ", " + std::to_string(o.v->strides[3]) + "}";
    };
    auto stat = [&](const Operand& o) {
      return std::string("Strided1<") + (o.writes ? "float" : "const float") + ">{" + o.name + " + n * " +
             std::to_string(o.v->strides[0]) + " + h * " + std::to_string(o.v->strides[1]) + ", " +
             std::to_string(o.v->strides[2]) + "}";
    };
    r << "      attention_bwd_pair<float>(";
    for (int i = 0; i < 10; ++i)
      r << (i ? ",\n                                " : "") << (i == 5 || i == 6 ? stat(operands[i]) : pair(operands[i]));
    r << ",\n                                dims, static_cast<float>(" << num(a->scale) << "));\n    }\n";
  } else if (const auto* a = std::get_if<ops::UnaryBwdArgs>(&c.args)) {
    STRATA_CHECK(dense_same_layout(a->x, a->dx) && dense_same_layout(a->y, a->dx) && dense_same_layout(a->dy, a->dx),
                 "strata_codegen: ", op, " reads or writes ", shape(a->x), " in more than one layout; the onednn "
                 "emitter writes out the plain loop for one layout only");
    r << "    const float* x = " << in(a->x, "x") << ";\n    const float* y = " << in(a->y, "y") << ";\n";
    r << "    const float* dy = " << in(a->dy, "dy") << ";\n    float* dx = " << out(a->dx, "dx") << ";\n";
    r << "    for (int64_t i = 0; i < " << a->x.numel() << "; ++i) dx[i] = pointwise::" << ops::unary_name(a->fn)
      << "_bwd(x[i], y[i], dy[i], " << num(a->p0) << ", " << num(a->p1) << ");\n";
  } else if (const auto* a = std::get_if<ops::IndexAddArgs>(&c.args)) {
    STRATA_CHECK(a->dim == 0 && a->x.dim() == 2 && a->y.dim() == 2 && a->index.dtype == DType::i64 &&
                     a->index.dim() == 1,
                 "strata_codegen: ", op, " adds ", shape(a->x), " into ", shape(a->y), " by ",
                 dtype_name(a->index.dtype), " indices in dim ", a->dim, "; the onednn emitter writes out the rows of "
                 "a matrix added at i64 indices only");
    const int64_t rows = a->y.sizes[0], n = a->index.numel();
    r << "    const int64_t* ids = reinterpret_cast<const int64_t*>(" << state(b, a->index, op + " argument index")
      << ");\n";
    r << "    const float* x = " << in(a->x, "x") << ";\n    float* y = " << out(a->y, "y") << ";\n";
    r << "    for (int64_t i = 0; i < " << n << "; ++i) {\n      const int64_t id = ids[i * " << a->index.strides[0]
      << "];\n";
    r << "      if (id < 0 || id >= " << rows << ")\n        throw std::invalid_argument(\"token \" + std::to_string(i) + "
      << "\" is \" + std::to_string(id) + \", out of range [0, " << rows << ")\");\n";
    r << "      add_row_into<float>(x + i * " << a->x.strides[0] << ", " << i64(a->x.strides[1]) << ", y + id * "
      << a->y.strides[0] << ", " << i64(a->y.strides[1]) << ", " << i64(a->x.sizes[1]) << ");\n    }\n";
  } else if (const auto* a = std::get_if<ops::ReduceDimsArgs>(&c.args)) {
    // The position embedding's gradient: dy summed over the batch, each output element from 0 in the
    // reduced elements' row-major order, as strata's reduce_dims sums it.
    STRATA_CHECK(a->fn == ops::ReduceFn::sum && a->x.dim() == a->y.dim() && a->y.sizes[0] == 1 &&
                     std::equal(a->x.sizes.begin() + 1, a->x.sizes.end(), a->y.sizes.begin() + 1),
                 "strata_codegen: ", op, " reduces ", shape(a->x), " to ", shape(a->y), "; the onednn emitter writes "
                 "out a sum over the leading dim only");
    const int64_t outer = a->x.sizes[0];
    const int64_t inner = a->y.numel();
    STRATA_CHECK(a->y.is_contiguous() && a->x.is_contiguous(), "strata_codegen: ", op, " reads or writes strides; the "
                 "onednn emitter writes out the sum of dense buffers only");
    r << "    const float* x = " << in(a->x, "x") << ";\n    float* y = " << out(a->y, "y") << ";\n";
    r << "    for (int64_t i = 0; i < " << inner << "; ++i) y[i] = sum_strided<float>(x + i, " << i64(inner) << ", "
      << i64(outer) << ");\n";
  } else if (const auto* a = std::get_if<ops::CopyArgs>(&c.args)) {
    // wte's gradient from the output projection's [C, V] product, laid out [V, C]: values moved (the
    // backend's reorder primitive moves the same f32 bits).
    STRATA_CHECK(a->x.dtype == DType::f32 && a->y.dtype == DType::f32 && a->x.sizes == a->y.sizes &&
                     a->x.dim() <= 4,
                 "strata_codegen: ", op, " converts ", shape(a->x), " ", dtype_name(a->x.dtype), " into ", shape(a->y),
                 " ", dtype_name(a->y.dtype), "; the onednn emitter writes out f32 copies between layouts only");
    const int d = a->y.dim();
    r << "    const float* x = " << in(a->x, "x") << ";\n    float* y = " << out(a->y, "y") << ";\n";
    r << "    const int64_t sizes[" << d << "] = " << dims_of(a->y.sizes) << ";\n";
    r << "    const int64_t strides[3][" << d << "] = {" << dims_of(a->x.strides) << ", " << dims_of(a->y.strides) << ", "
      << dims_of(a->y.strides) << "};\n";
    r << "    for_each_offset(sizes, strides, [&](const int64_t (&o)[3]) { y[o[1]] = x[o[0]]; });\n";
  } else {
    STRATA_FAIL("strata_codegen: op ", op, " is not a GPT backward op the onednn emitter writes out (internal error)");
  }
  return plain_loop(r);
}

}  // namespace strata::codegen::onednn::detail
