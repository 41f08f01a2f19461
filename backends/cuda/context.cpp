#include "strata/backends/cuda/context.h"
#include "strata/backends/cuda/lazy_libraries.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <string_view>

#include "strata/core/tensor.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types

namespace {
// What a user reads: the library function that failed and where in strata it was called, not the
// macro's whole argument expression nor the build machine's path of the source file.
std::string failed_call(const char* call, const char* file, int line) {
  std::string_view c(call), f(file);
  c = c.substr(0, c.find('('));
  if (const size_t slash = f.rfind('/'); slash != std::string_view::npos) f.remove_prefix(slash + 1);
  return strata::detail::concat(c, " (strata ", f, ":", line, ")");
}
}  // namespace

void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  STRATA_FAIL("cuda: ", failed_call(call, file, line), " failed: ", cudaGetErrorName(e), " (",
              cudaGetErrorString(e), ")");
}
void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line) {
  char detail[256] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  STRATA_FAIL("cudnn: ", failed_call(call, file, line), " failed: ", cudnnGetErrorString(s),
              detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}
void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  STRATA_FAIL("cublas: ", failed_call(call, file, line), " failed: ", cublasGetStatusString(s));
}

void* Context::workspace(size_t bytes) {
  if (bytes <= ws_bytes_) return ws_;
  release_arena();
  const size_t want = bin_size(bytes);
  ws_ = allocator->allocate(want);
  ws_bytes_ = want;
  return ws_;
}

void Context::release_workspace() {
  {
    std::lock_guard<std::mutex> lock(sc_mutex_);
    if (sc_stack_.empty()) release_scratch_locked();
  }
  release_arena();
}

void Context::release_arena() { give_back_kept(ws_, ws_bytes_); }

void Context::release_scratch_locked() { give_back_kept(sc_, sc_bytes_); }

void Context::give_back_kept(void*& p, size_t& bytes) {
  if (!p) return;
  allocator->deallocate(p, bytes);
  p = nullptr;
  bytes = 0;
  ++ws_generation_;
}

void* Context::scratch_take(size_t bytes) {
  constexpr size_t align = 256;  // what cudaMalloc gives, enough for any vector access
  const size_t need = (bytes + align - 1) / align * align;
  if (need == 0 || need > kScratchMax) return nullptr;
  std::lock_guard<std::mutex> lock(sc_mutex_);
  const size_t top = sc_stack_.empty() ? 0 : sc_stack_.back().end;
  if (top + need > sc_bytes_) sc_want_ = std::min(kScratchMax, std::max(sc_want_, top + need));
  if (sc_stack_.empty() && sc_want_ > sc_bytes_) {
    release_scratch_locked();
    const size_t grown = bin_size(sc_want_);
    try {
      sc_ = allocator->allocate(grown);
      sc_bytes_ = grown;
    } catch (const Error&) {
      // Out of memory for the whole scratch: this request alone goes to the allocator,
      // and the scratch is tried again at this request's size only.
      sc_want_ = 0;
    }
  }
  // Does not fit (pieces live above, or the scratch at its most already): the allocator.
  if (top + need > sc_bytes_) return nullptr;
  sc_stack_.push_back({top, top + need, true});
  return static_cast<char*>(sc_) + top;
}

void Context::scratch_give(void* p) {
  std::lock_guard<std::mutex> lock(sc_mutex_);
  const size_t at = static_cast<size_t>(static_cast<char*>(p) - static_cast<char*>(sc_));
  for (auto it = sc_stack_.rbegin(); it != sc_stack_.rend(); ++it) {
    if (it->begin == at && it->live) {
      it->live = false;
      break;
    }
  }
  while (!sc_stack_.empty() && !sc_stack_.back().live) sc_stack_.pop_back();
}

namespace {

void device_copy_hook(const Tensor& src, const Tensor& dst) {
  if (src.numel() == 0) return;
  copy_views(context(), TensorView(src), TensorView(dst));
}

struct Init {
  Context* ctx = nullptr;
  std::string why;
};

Init initialise() {
  Init r;
  r.why = no_device_reason();
  if (!r.why.empty()) return r;
  try {
    auto* c = new Context;  // never destroyed, see context.h
    c->device = 0;
    STRATA_CUDA_CHECK(cudaSetDevice(0));
    STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, 0));
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    load_libraries();
    STRATA_CUDNN_CHECK(cudnnCreate(&c->cudnn));
    STRATA_CUDNN_CHECK(cudnnSetStream(c->cudnn, c->stream));
    STRATA_CUBLAS_CHECK(cublasCreate(&c->cublas));
    STRATA_CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    STRATA_CUBLAS_CHECK(cublasSetPointerMode(c->cublas, CUBLAS_POINTER_MODE_HOST));
    c->allocator = new CachingAllocator(0, c->stream);
    c->pinned = new PinnedAllocator;
    // cuBLAS gets a fixed workspace of its own: with it, results do not depend on
    // what cuBLAS could allocate at the time (cuBLAS docs, "Results reproducibility").
    c->cublas_workspace_bytes = size_t{32} << 20;
    c->cublas_workspace = c->allocator->allocate(c->cublas_workspace_bytes);
    STRATA_CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->cublas_workspace, c->cublas_workspace_bytes));
    STRATA_CUBLAS_CHECK(cublasLtCreate(&c->cublaslt));
    register_device_allocator(DeviceType::cuda, c->allocator);
    set_pinned_host_allocator(c->pinned);
    set_device_copy_hook(DeviceType::cuda, &device_copy_hook);
    r.ctx = c;
  } catch (const Error& err) {
    r.why = std::string("CUDA device present but initialisation failed: ") + err.what();
  }
  return r;
}

const Init& init_once() {
  static const Init init = initialise();
  return init;
}

}  // namespace

std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
  }
  return n == 0 ? "no CUDA device" : "";
}

Context* try_context(std::string* why) {
  const Init& i = init_once();
  if (!i.ctx && why) *why = i.why;
  return i.ctx;
}

Context& context() {
  const Init& i = init_once();
  STRATA_CHECK(i.ctx != nullptr, "cuda backend: ", i.why);
  return *i.ctx;
}

bool is_dense_in(const TensorView& v, Layout l) {
  return l == Layout::nhwc ? is_channels_last_layout(v.sizes, v.strides) : is_contiguous_layout(v.sizes, v.strides);
}

Layout layout_of(const TensorView& v) {
  if (v.dim() == 4 && is_channels_last_layout(v.sizes, v.strides) && !is_contiguous_layout(v.sizes, v.strides))
    return Layout::nhwc;
  return Layout::nchw;
}

TensorView make_temp(Context& ctx, DeviceBuffer& buf, const Shape& sizes, DType dt, Layout l) {
  buf = DeviceBuffer(ctx, static_cast<size_t>(sizes.numel()) * dtype_size(dt));
  TensorView t;
  t.data = buf.get();
  t.sizes = sizes;
  t.strides = l == Layout::nhwc ? channels_last_strides(sizes) : contiguous_strides(sizes);
  t.dtype = dt;
  t.device = Device::cuda(ctx.device);
  t.defined = true;
  return t;
}

Staged stage_in(Context& ctx, const TensorView& v, Layout l) {
  Staged s;
  s.orig = &v;
  if (is_dense_in(v, l) && v.device.is_cuda()) {
    s.view = v;
    return s;
  }
  s.view = make_temp(ctx, s.buf, v.sizes, v.dtype, l);
  s.temp = true;
  ++ctx.staging_copies;
  copy_views(ctx, v, s.view);
  return s;
}

Staged stage_out(Context& ctx, const TensorView& v, Layout l) {
  Staged s;
  s.orig = &v;
  if (is_dense_in(v, l) && v.device.is_cuda()) {
    s.view = v;
    return s;
  }
  s.view = make_temp(ctx, s.buf, v.sizes, v.dtype, l);
  s.temp = true;
  return s;
}

void Staged::finish(Context& ctx) {
  if (!temp) return;
  ++ctx.staging_copies;
  copy_views(ctx, view, *orig);
}

}  // namespace strata::backends::cuda
