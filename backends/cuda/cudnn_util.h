#pragma once
// RAII cuDNN descriptors built from TensorViews (sizes and the actual strides), and
// the internal helpers that ops implemented in different files share.
// Internal to backends/cuda.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "strata/backends/cuda/context.h"

namespace strata::backends::cuda {

inline cudnnDataType_t cudnn_dtype(DType t, const char* op) {
  switch (t) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: break;
  }
  STRATA_FAIL(op, ": cuDNN has no ", dtype_name(t), " path in strata");
}

inline int to_int(int64_t v, const char* op) {
  STRATA_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), op, ": dimension or stride ", v,
               " does not fit cuDNN's int");
  return static_cast<int>(v);
}

class TensorDesc {
 public:
  TensorDesc() { STRATA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // Rank-4 views as they are; rank-2 [N,C] as [N,C,1,1]; rank-1 [C] as [1,C,1,1].
  void set(const ops::TensorView& v, const char* op) { set(v, v.dtype, op); }
  void set(const ops::TensorView& v, DType dt, const char* op) {
    int64_t s[4], st[4];
    if (v.dim() == 4) {
      for (int i = 0; i < 4; ++i) s[i] = v.sizes[i], st[i] = v.strides[i];
    } else if (v.dim() == 2) {
      s[0] = v.sizes[0], s[1] = v.sizes[1], s[2] = s[3] = 1;
      st[0] = v.strides[0], st[1] = v.strides[1], st[2] = st[3] = 1;
    } else {
      STRATA_CHECK(v.dim() == 1, op, ": expected a rank 1, 2 or 4 tensor, got ", v.sizes.str());
      s[0] = 1, s[1] = v.sizes[0], s[2] = s[3] = 1;
      st[0] = v.sizes[0] * v.strides[0], st[1] = v.strides[0], st[2] = st[3] = 1;
    }
    // cuDNN rejects zero strides; a size-1 dimension's stride is arbitrary anyway.
    for (int i = 0; i < 4; ++i)
      if (s[i] == 1 && st[i] == 0) st[i] = 1;
    STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(d_, cudnn_dtype(dt, op), to_int(s[0], op), to_int(s[1], op),
                                                    to_int(s[2], op), to_int(s[3], op), to_int(st[0], op),
                                                    to_int(st[1], op), to_int(st[2], op), to_int(st[3], op)));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() { STRATA_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  void set(const ops::TensorView& w, Layout l, const char* op) {
    STRATA_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d_, cudnn_dtype(w.dtype, op),
                                                  l == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                                  to_int(w.sizes[0], op), to_int(w.sizes[1], op),
                                                  to_int(w.sizes[2], op), to_int(w.sizes[3], op)));
  }
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() { STRATA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

class PoolDesc {
 public:
  PoolDesc() { STRATA_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_)); }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  cudnnPoolingDescriptor_t get() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

class ActDesc {
 public:
  ActDesc() { STRATA_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d_)); }
  ~ActDesc() { cudnnDestroyActivationDescriptor(d_); }
  ActDesc(const ActDesc&) = delete;
  ActDesc& operator=(const ActDesc&) = delete;
  cudnnActivationDescriptor_t get() const { return d_; }

 private:
  cudnnActivationDescriptor_t d_ = nullptr;
};

// alpha/beta scalars in the type cuDNN wants for `dt` (double for f64, else float).
struct Scalars {
  float f1 = 1.f, f0 = 0.f;
  double d1 = 1.0, d0 = 0.0;
  bool dbl;
  explicit Scalars(DType dt) : dbl(dt == DType::f64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : &f1; }
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : &f0; }
};

// cuDNN's legacy descriptors hold 32-bit sizes and strides, and cuDNN refuses a tensor whose
// elements span 2^31 or more (CUDNN_STATUS_NOT_SUPPORTED from cudnnSetTensor4dDescriptorEx).
// Convolution and pooling treat the samples of a batch independently, so a call on larger
// activations runs as several calls along the batch, as PyTorch splits them for cuDNN.
constexpr int64_t kCudnnMaxSpan = std::numeric_limits<int32_t>::max();
// Elements from the view's first to its last, both included (0 for an empty view).
int64_t span_of(const ops::TensorView& v);
inline bool fits_cudnn(const ops::TensorView& v) { return span_of(v) <= kCudnnMaxSpan; }
// The most samples (dimension 0) of v, named `name` in errors, that one cuDNN call may take:
// all of them when v fits already. Throws naming the op, the tensor and the limit when even
// one sample does not fit.
int64_t samples_per_call(const char* op, const char* name, const ops::TensorView& v);
// Samples [n0, n0 + n) of v.
ops::TensorView narrow_batch(const ops::TensorView& v, int64_t n0, int64_t n);
// f(b, n0) for each piece of a call: b is `a` with its batched views (members of Args, each
// with its name for errors) narrowed to the piece's samples, which start at n0.
template <class Args, class F>
void along_batch(const char* op, const Args& a,
                 std::initializer_list<std::pair<ops::TensorView Args::*, const char*>> batched, F&& f) {
  const int64_t n = (a.*(batched.begin()->first)).sizes[0];
  int64_t per = n;
  for (const auto& [m, name] : batched) per = std::min(per, samples_per_call(op, name, a.*m));
  for (int64_t n0 = 0; n0 < n; n0 += per) {
    Args b = a;
    for (const auto& [m, name] : batched) b.*m = narrow_batch(a.*m, n0, std::min(per, n - n0));
    f(b, n0);
  }
}
// y += x, same sizes (any strides): the pieces of a split backward-weight call are summed so.
void add_into(Context& ctx, const ops::TensorView& y, const ops::TensorView& x);

// Kernels of other files (element-wise and reduction .cu files).
// y += b broadcast along dimension `dim` of y (b is 1-D of size y.sizes[dim]).
void add_along(Context& ctx, const ops::TensorView& y, const ops::TensorView& b, int dim);
// conv2d's bias and inference epilogue on its output y, in one pass: y = relu?(y + bias + z)
// (bias [K] along dimension 1 and z optional), rounded as the separate ops round it.
void conv_epilogue(Context& ctx, const ops::TensorView& y, const ops::TensorView& bias, const ops::TensorView& z,
                   bool relu);
// out[c] = scale * sum of x over every dimension but `dim` (out 1-D, any float dtype).
void sum_along(Context& ctx, const ops::TensorView& x, int dim, const ops::TensorView& out, double scale = 1.0);
// out[c] = sum over rows of x[r, c] for a dense 2-D x (columns contiguous, 16-byte aligned rows,
// whole 16-byte packs per row) in out's dtype: linear's bias gradient. False (nothing run) for
// any other x; sum_along takes those.
bool column_sums(Context& ctx, const ops::TensorView& x, const ops::TensorView& out);
// y = value everywhere.
void fill_view(Context& ctx, const ops::TensorView& y, double value);
// relu with strata's own kernel (any rank, any strides).
void relu_fwd_kernel(Context& ctx, const ops::TensorView& x, const ops::TensorView& y);
void relu_bwd_kernel(Context& ctx, const ops::TensorView& y, const ops::TensorView& dy, const ops::TensorView& dx);

// ---- cuDNN's graph (backend) API: what the convolution and attention graphs share ----

// The handle attributes are deprecated in cuDNN 9 in favour of device-property
// descriptors, but remain the documented way to bind a graph and a plan to the
// handle (and stream) they run on; named by value to keep the build warning-free.
constexpr auto kGraphHandle = static_cast<cudnnBackendAttributeName_t>(800);  // OPERATIONGRAPH_HANDLE
constexpr auto kPlanHandle = static_cast<cudnnBackendAttributeName_t>(400);   // EXECUTION_PLAN_HANDLE

// One backend descriptor, destroyed with its owner; set() throws on a refused attribute.
class GraphDesc {
 public:
  explicit GraphDesc(cudnnBackendDescriptorType_t t) { STRATA_CUDNN_CHECK(cudnnBackendCreateDescriptor(t, &d_)); }
  ~GraphDesc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  GraphDesc(GraphDesc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  GraphDesc(const GraphDesc&) = delete;
  GraphDesc& operator=(const GraphDesc&) = delete;
  template <class T>
  GraphDesc& set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const T* v) {
    STRATA_CUDNN_CHECK(cudnnBackendSetAttribute(d_, a, t, n, v));
    return *this;
  }
  GraphDesc& set_desc(cudnnBackendAttributeName_t a, const GraphDesc& other) {
    return set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &other.d_);
  }
  void finalize() { STRATA_CUDNN_CHECK(cudnnBackendFinalize(d_)); }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Graph tensors carry the byte alignment the engines may assume; plans are keyed on it,
// so a view at an odd offset gets its own (slower, but correct) plan.
inline int64_t byte_alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t al = 16;
  while (al > 1 && a % static_cast<uintptr_t>(al) != 0) al /= 2;
  return al;
}

// A finalized rank-4 graph tensor. virtual: an intermediate no kernel writes to memory;
// by_value: a host scalar passed in the variant pack (its pointer) at each execution.
GraphDesc graph_tensor(cudnnDataType_t dt, const int64_t (&dims)[4], const int64_t (&strides)[4], int64_t uid,
                       int64_t align, bool is_virtual = false, bool by_value = false);

// A pointwise node y = mode(x[, b][, t]) (t: binary_select's condition) computing in `prec`
// (axis: gen_index's), finalized; its mode descriptor `pw` must outlive it.
GraphDesc pointwise_mode(cudnnPointwiseMode_t mode, cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1);
GraphDesc pointwise_node(const GraphDesc& pw, const GraphDesc& x, const GraphDesc* b, const GraphDesc* t,
                         const GraphDesc& y);

// Execution plans for a finalized operation graph, in heuristic order (mode A, then the
// fallback list when A offers nothing usable): at most `want`, each with its workspace,
// skipping configs `reject` names a reason for, plans that do not finalize and plans
// needing more than max_ws bytes of workspace; `tried` collects why each was skipped.
struct GraphCandidate {
  GraphDesc cfg, plan;
  int64_t ws;
};
std::vector<GraphCandidate> graph_candidates(Context& ctx, const GraphDesc& graph, size_t want, size_t max_ws,
                                             const std::function<std::string(cudnnBackendDescriptor_t)>& reject,
                                             std::string& tried);

// Enqueues `plan` on the handle's stream with the buffers bound by unique id.
void execute_graph(Context& ctx, cudnnBackendDescriptor_t plan, void* ws, int64_t n, void* const* ptrs,
                   const int64_t* uids);

}  // namespace strata::backends::cuda
