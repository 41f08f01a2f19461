// copy: any dtype to any dtype, any strides to any strides, host<->device and
// device<->device. Same-dtype copies between identically laid out dense tensors
// are one cudaMemcpyAsync; everything else runs a converting kernel on the device,
// staging host data through device memory.
#include <cstring>
#include <vector>

#include "strata/backends/cuda/call_observer.h"
#include "strata/backends/cuda/kernels.cuh"
#include "strata/backends/cuda/index_errors.h"

namespace strata::backends::cuda {

using namespace strata::ops;  // the op table's argument types

namespace {

// codegen:begin cuda_kernels convert
template <class S, class D>
struct ConvertFn {
  const S* src;
  D* dst;
  __device__ void operator()(int64_t, const int64_t* off) const { dst[off[1]] = store<D>(load(src[off[0]])); }
};
// codegen:end

// The fast forms of a device conversion: both operands walk rows of L contiguous elements (in
// the destination's memory order; a dense pair is one row), moved V elements a thread as
// 16-byte (or narrower) loads and stores. A row is cut into segments of `seg` vectors; a group
// of `lanes` threads (a power of two from a warp to the block) takes a segment at a time, its
// row's offsets worked out once per segment, and walks it. The general kernel works out every
// element's offsets with 64-bit divisions per dimension (a step of GPT-2 training spent 13 ms in
// its head permutes and 9 ms in its casts at 5-25 % of the memory's rate,
// docs/results/gpt_training.md), and a first form of this one a 64-bit division per vector
// (linear's broadcast of the bias, 48 copies a step, at 0.5 TB/s).
template <class S, class D, int V>
__global__ void __launch_bounds__(kThreads) convert_rows_kernel(Strided<2> rows, int64_t vecs_per_row, int64_t seg,
                                                                int64_t segs_per_row, int lanes, const S* src,
                                                                D* dst) {
  const int groups = kThreads / lanes;
  const int lane = threadIdx.x % lanes;
  const int64_t segments = rows.n * segs_per_row;
  const int64_t step = static_cast<int64_t>(gridDim.x) * groups;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * groups + threadIdx.x / lanes; g < segments; g += step) {
    const int64_t r = g / segs_per_row, c0 = (g - r * segs_per_row) * seg;
    const int64_t c1 = c0 + seg < vecs_per_row ? c0 + seg : vecs_per_row;
    int64_t off[2];
    rows.offsets(r, off);
    const auto* from = reinterpret_cast<const Pack<S, V>*>(src + off[0]);
    auto* to = reinterpret_cast<Pack<D, V>*>(dst + off[1]);
    for (int64_t c = c0 + lane; c < c1; c += lanes) {
      const Pack<S, V> in = from[c];
      Pack<D, V> out;
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = store<D>(load(in.v[j]));
      to[c] = out;
    }
  }
}

// The widest V (16 bytes of the wider dtype at most) that divides the row and every row start.
template <class S, class D>
bool convert_rows(Context& ctx, const Strided<2>& s, const S* src, D* dst) {
  const int nd = s.nd;
  if (s.strides[0][nd - 1] != 1 || s.strides[1][nd - 1] != 1) return false;
  const int64_t row = s.sizes[nd - 1];
  constexpr int kWidest = static_cast<int>(16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D)));
  int v = kWidest;
  const auto fits = [&](int w) {
    if (row % w) return false;
    if (reinterpret_cast<uintptr_t>(src) % (w * sizeof(S)) || reinterpret_cast<uintptr_t>(dst) % (w * sizeof(D)))
      return false;
    for (int d = 0; d < nd - 1; ++d)
      if (s.strides[0][d] % w || s.strides[1][d] % w) return false;
    return true;
  };
  while (v > 1 && !fits(v)) v /= 2;
  if (v == 1 && row < 32) return false;  // short rows of single elements: the general kernel is as good
  Strided<2> rows{};  // the outer dimensions, one row per index
  rows.nd = nd > 1 ? nd - 1 : 1;
  rows.n = s.n / row;
  if (nd == 1) {
    rows.sizes[0] = 1;
  } else {
    for (int d = 0; d < nd - 1; ++d) {
      rows.sizes[d] = s.sizes[d];
      rows.strides[0][d] = s.strides[0][d];
      rows.strides[1][d] = s.strides[1][d];
    }
  }
  const int64_t vecs = row / v;
  // Lanes per segment: the row's vectors rounded up to a power of two, from a warp to the block;
  // segments of 8 vectors a lane, so a long row (a dense tensor is one) spreads over the GPU.
  int lanes = 32;
  while (lanes < kThreads && lanes < vecs) lanes *= 2;
  const int64_t seg = int64_t{lanes} * 8, segs = (vecs + seg - 1) / seg;
  const int64_t groups = kThreads / lanes;
  const int grid = grid_for(ctx, (rows.n * segs + groups - 1) / groups * kThreads);
  const auto go = [&]<int W>() {
    convert_rows_kernel<S, D, W><<<grid, kThreads, 0, ctx.stream>>>(rows, vecs, seg, segs, lanes, src, dst);
  };
  switch (v) {
    case 16: if constexpr (kWidest >= 16) go.template operator()<16>(); break;
    case 8: if constexpr (kWidest >= 8) go.template operator()<8>(); break;
    case 4: if constexpr (kWidest >= 4) go.template operator()<4>(); break;
    case 2: if constexpr (kWidest >= 2) go.template operator()<2>(); break;
    default: go.template operator()<1>(); break;
  }
  STRATA_CUDA_CHECK_LAUNCH("copy (rows)");
  return true;
}

// A transposed copy, dst [R, C] in rows of ldd from src whose columns are contiguous (element
// (r, c) at r + c * lds; after strided_by_output, a 2-D view whose strides are (1, lds)): 32 x 32
// tiles through shared memory, read along src's columns and written along dst's rows, both
// coalesced. The general kernel wrote one and read the other 32 elements apart (the tied GPT
// head's [768, 50,257] weight gradient into [50,257, 768]: 263 us on an H200).
template <class S, class D>
__global__ void __launch_bounds__(256) transpose_kernel(const S* src, int64_t lds, D* dst, int64_t ldd, int64_t r_n,
                                                        int64_t c_n) {
  __shared__ D tile[32][33];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 32, c0 = static_cast<int64_t>(blockIdx.x) * 32;
  for (int k = threadIdx.y; k < 32; k += 8) {
    const int64_t r = r0 + threadIdx.x, c = c0 + k;
    if (r < r_n && c < c_n) tile[k][threadIdx.x] = store<D>(load(src[r + c * lds]));
  }
  __syncthreads();
  for (int k = threadIdx.y; k < 32; k += 8) {
    const int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < r_n && c < c_n) dst[r * ldd + c] = tile[threadIdx.x][k];
  }
}

template <class S, class D>
bool convert_transposed(Context& ctx, const Strided<2>& s, const S* src, D* dst) {
  if (s.nd != 2 || s.strides[0][0] != 1 || s.strides[1][1] != 1 || s.sizes[0] < 32 || s.sizes[1] < 32) return false;
  const int64_t r_n = s.sizes[0], c_n = s.sizes[1];
  if ((r_n + 31) / 32 > 65535) return false;
  const dim3 grid(static_cast<unsigned>((c_n + 31) / 32), static_cast<unsigned>((r_n + 31) / 32));
  transpose_kernel<S, D><<<grid, dim3(32, 8), 0, ctx.stream>>>(src, s.strides[0][1], dst, s.strides[1][0], r_n, c_n);
  STRATA_CUDA_CHECK_LAUNCH("copy (transposed tiles)");
  return true;
}

// Device-to-device (both pointers on the device), any dtypes and strides.
void convert_on_device(Context& ctx, const TensorView& src, const TensorView& dst) {
  if (observing() && copies_observed())
    observe_library({.kind = LibraryCall::Kind::convert, .a = src.data, .c = dst.data});
  const auto s = strided_by_output(src.sizes, src, dst);
  dispatch_all(src.dtype, [&](auto sv) {
    using S = decltype(sv);
    dispatch_all(dst.dtype, [&](auto dv) {
      using D = decltype(dv);
      const S* from = static_cast<const S*>(src.data);
      D* to = static_cast<D*>(dst.data);
      if (!convert_rows(ctx, s, from, to) && !convert_transposed(ctx, s, from, to))
        launch_elementwise(ctx, s, ConvertFn<S, D>{from, to});
    });
  });
}

bool dense(const TensorView& v) {
  return is_contiguous_layout(v.sizes, v.strides) ||
         (v.dim() == 4 && is_channels_last_layout(v.sizes, v.strides));
}
bool same_strides(const TensorView& a, const TensorView& b) {
  if (is_contiguous_layout(a.sizes, a.strides) && is_contiguous_layout(b.sizes, b.strides)) return true;
  return a.dim() == 4 && is_channels_last_layout(a.sizes, a.strides) &&
         is_channels_last_layout(b.sizes, b.strides);
}
size_t nbytes(const TensorView& v) { return static_cast<size_t>(v.numel()) * dtype_size(v.dtype); }

// Host element gather/scatter between a strided view and a packed row-major buffer,
// byte-wise (same dtype).
void host_pack(const TensorView& v, void* packed) {
  const size_t es = dtype_size(v.dtype);
  const auto s = strided_of(v.sizes, v);
  const char* base = static_cast<const char*>(v.data);
  char* out = static_cast<char*>(packed);
  for (int64_t k = 0; k < s.n; ++k) {
    int64_t off;
    s.offsets(k, &off);
    std::memcpy(out + k * es, base + off * static_cast<int64_t>(es), es);
  }
}
void host_unpack(const void* packed, const TensorView& v) {
  const size_t es = dtype_size(v.dtype);
  const auto s = strided_of(v.sizes, v);
  char* base = static_cast<char*>(v.data);
  const char* in = static_cast<const char*>(packed);
  for (int64_t k = 0; k < s.n; ++k) {
    int64_t off;
    s.offsets(k, &off);
    std::memcpy(base + off * static_cast<int64_t>(es), in + k * es, es);
  }
}

TensorView with_data(TensorView v, void* data, const Shape& strides, Device d) {
  v.data = data;
  v.strides = strides;
  v.device = d;
  return v;
}

// A copy as one cudaMemcpyAsync, for a code generator (call_observer.h).
void observe_memcpy(const TensorView& src, const TensorView& dst) {
  if (observing() && copies_observed())
    observe_library({.kind = LibraryCall::Kind::memcpy, .m = static_cast<int64_t>(nbytes(src)), .a = src.data,
                     .c = dst.data});
}

void host_to_device(Context& ctx, const TensorView& src, const TensorView& dst) {
  if (src.dtype == dst.dtype && dense(src) && same_strides(src, dst)) {
    observe_memcpy(src, dst);
    STRATA_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, nbytes(src), cudaMemcpyHostToDevice, ctx.stream));
    // Pageable sources are staged by the runtime before cudaMemcpyAsync returns;
    // pinned ones are read by DMA later, so wait to keep copy_into's contract.
    if (host_memory_is_pinned(src.data)) STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    return;
  }
  // Stage the source's bytes (packed if it is not dense) and convert on the device.
  if (copies_observed()) observe_library(LibraryCall::Kind::staged);
  const Device dev = Device::cuda(ctx.device);
  DeviceBuffer stage(ctx, nbytes(src));
  TensorView staged;
  if (dense(src)) {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(stage.get(), src.data, nbytes(src), cudaMemcpyHostToDevice, ctx.stream));
    if (host_memory_is_pinned(src.data)) STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    staged = with_data(src, stage.get(), src.strides, dev);
  } else {
    std::vector<char> packed(nbytes(src));
    host_pack(src, packed.data());
    STRATA_CUDA_CHECK(cudaMemcpyAsync(stage.get(), packed.data(), packed.size(), cudaMemcpyHostToDevice, ctx.stream));
    // `packed` is pageable: the runtime has copied it out by now.
    staged = with_data(src, stage.get(), contiguous_strides(src.sizes), dev);
  }
  convert_on_device(ctx, staged, dst);
}

// Waits for the stream; then raises a bad label an earlier cross-entropy found (index_errors.h):
// reading the loss is where a user first sees its value.
void device_to_host(Context& ctx, const TensorView& src, const TensorView& dst) {
  if (src.dtype == dst.dtype && dense(dst) && same_strides(src, dst)) {
    observe_memcpy(src, dst);
    STRATA_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, nbytes(src), cudaMemcpyDeviceToHost, ctx.stream));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    raise_bad_index(ctx);
    return;
  }
  // Convert on the device into dst's dtype and (when dense) dst's layout, then copy.
  if (copies_observed()) observe_library(LibraryCall::Kind::staged);
  const Device dev = Device::cuda(ctx.device);
  DeviceBuffer stage(ctx, nbytes(dst));
  const Shape layout = dense(dst) ? dst.strides : contiguous_strides(dst.sizes);
  const TensorView staged = with_data(dst, stage.get(), layout, dev);
  convert_on_device(ctx, src, staged);
  if (dense(dst)) {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(dst.data, stage.get(), nbytes(dst), cudaMemcpyDeviceToHost, ctx.stream));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    raise_bad_index(ctx);
    return;
  }
  std::vector<char> packed(nbytes(dst));
  STRATA_CUDA_CHECK(cudaMemcpyAsync(packed.data(), stage.get(), packed.size(), cudaMemcpyDeviceToHost, ctx.stream));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  host_unpack(packed.data(), dst);
  raise_bad_index(ctx);
}

}  // namespace

void copy_views(Context& ctx, const TensorView& src, const TensorView& dst) {
  STRATA_CHECK(src.sizes == dst.sizes, "copy: source ", dtype_name(src.dtype), src.sizes.str(), " and destination ",
               dtype_name(dst.dtype), dst.sizes.str(), " differ in shape");
  if (src.numel() == 0) return;
  if (observing() && !copies_observed())
    observe_library({.kind = LibraryCall::Kind::outside_copy, .a = src.data, .c = dst.data});
  const bool sd = src.device.is_cuda(), dd = dst.device.is_cuda();
  if (sd && dd) {
    STRATA_CHECK(src.device == dst.device, "copy: between ", src.device.str(), " and ", dst.device.str(),
                 " is not supported (one device per process)");
    if (src.dtype == dst.dtype && dense(src) && same_strides(src, dst)) {
      if (src.data != dst.data) observe_memcpy(src, dst);
      if (src.data != dst.data)
        STRATA_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, nbytes(src), cudaMemcpyDeviceToDevice, ctx.stream));
      return;
    }
    convert_on_device(ctx, src, dst);
  } else if (dd) {
    host_to_device(ctx, src, dst);
  } else if (sd) {
    device_to_host(ctx, src, dst);
  } else {
    STRATA_CHECK(src.dtype == dst.dtype, "copy: the cuda backend was asked to convert ", dtype_name(src.dtype),
                 " to ", dtype_name(dst.dtype), " between two cpu tensors; use a cpu backend");
    std::vector<char> packed(nbytes(src));
    host_pack(src, packed.data());
    host_unpack(packed.data(), dst);
  }
}

bool host_memory_is_pinned(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

}  // namespace strata::backends::cuda
