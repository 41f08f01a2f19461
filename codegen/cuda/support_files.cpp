#include "strata/codegen/cuda/support_files.h"

#include "strata/codegen/cuda/snippets.h"
#include "strata/codegen/project_files.h"
#include "strata/core/shape.h"

namespace strata::codegen::cuda {

std::string kernels_h() {
  return R"cg(#pragma once
// Launchers of strata's own kernels (kernels.cu, which carries them as strata's source), for the
// calls strata's cuda backend runs with its own kernels rather than a library's.
#include <cuda_runtime.h>

#include <cstdint>

namespace generated::kernels {

// y = a + b over n dense elements.
void add(cudaStream_t s, const float* a, const float* b, float* y, int64_t n);
// y = x > 0 ? x : 0 over n dense elements.
void relu(cudaStream_t s, const float* x, float* y, int64_t n);
// y = relu?(y + bias[channel] + z) over a dense NCHW y of n elements, c channels of hw pixels.
void conv_epilogue(cudaStream_t s, float* y, const float* bias, const float* z, int64_t n, int64_t c, int64_t hw,
                   bool relu);
// y[n, c] = the mean of x's (n, c) plane, x [N, C, H, W] with strides sx, y with strides sy.
void global_avg_pool(cudaStream_t s, const float* x, const int64_t (&sizes)[4], const int64_t (&sx)[4], float* y,
                     const int64_t (&sy)[2]);
// dst = src element by element over an indexing strata coalesced: nd dimensions of `sizes`, each
// operand with its own strides (0 broadcasts), n elements in all.
void convert(cudaStream_t s, int nd, int64_t n, const int64_t* sizes, const int64_t* src_strides,
             const int64_t* dst_strides, const float* src, float* dst);
// y = x w^T (+ b) for m <= 4 rows (x [m, k] rows ldx apart, w [n, k] rows ldw apart, b with
// stride bs or null, y with strides ys0, ys1): strata's few-rows linear kernel, v elements a load.
void gemv(cudaStream_t s, int v, const float* x, const float* w, const float* b, float* y, int64_t m, int64_t n,
          int64_t k, int64_t ldx, int64_t ldw, int64_t bs, int64_t ys0, int64_t ys1);
// y [N, K, Ho, Wo] = x [N, C, H, W]'s block x block pixel blocks as channels, x padded with zeros by
// (pad_h, pad_w): strata's space_to_depth (ResNet's stem on the GPU).
void space_to_depth(cudaStream_t s, const float* x, const int64_t (&xs)[4], const int64_t (&xst)[4], float* y,
                    const int64_t (&ys)[4], const int64_t (&yst)[4], int block, int pad_h, int pad_w);

}  // namespace generated::kernels
)cg";
}

std::string kernels_cu() {
  return std::string(R"cg(// strata's own kernels, as strata's cuda backend runs them: the code between the launchers'
// namespace lines below is strata's (backends/cuda, its "codegen:begin cuda_kernels" blocks),
// written here by strata_codegen as it is.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels.h"

#define STRATA_HOST_DEVICE __host__ __device__

namespace generated::kernels {
namespace strata_code {

inline constexpr int kMaxDims = )cg") + std::to_string(strata::kMaxDims) + ";\n" + k_cuda_kernels + R"cg(
}  // namespace strata_code

namespace {

using namespace strata_code;

void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(kernel) + ": " + cudaGetErrorString(e));
}

// Grid-stride kernels: the grid changes which thread computes an element, never its value.
unsigned grid(int64_t n) { return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 4096)); }

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// strata's vectorised form where every operand is 16-byte aligned, else one element at a time: the
// same operation on each element either way.
template <class Op>
void binary(cudaStream_t s, const float* a, const float* b, float* y, int64_t n, const char* what) {
  if (n <= 0) return;
  if (n >= 4 && aligned16(a) && aligned16(b) && aligned16(y))
    dense_binary_kernel<float, 4, Op><<<grid(n / 4), kThreads, 0, s>>>(a, b, y, n, Op{});
  else
    dense_binary_kernel<float, 1, Op><<<grid(n), kThreads, 0, s>>>(a, b, y, n, Op{});
  check_launch(what);
}

}  // namespace

void add(cudaStream_t s, const float* a, const float* b, float* y, int64_t n) {
  binary<AddOp<float>>(s, a, b, y, n, "add");
}

void relu(cudaStream_t s, const float* x, float* y, int64_t n) { binary<ReluOp<float>>(s, x, x, y, n, "relu"); }

void conv_epilogue(cudaStream_t s, float* y, const float* bias, const float* z, int64_t n, int64_t c, int64_t hw,
                   bool relu) {
  if (n <= 0) return;
  conv_epilogue_dense_kernel<float, false><<<grid(n), kThreads, 0, s>>>(
      y, bias, z, static_cast<uint32_t>(n), static_cast<uint32_t>(c), static_cast<uint32_t>(hw), relu);
  check_launch("conv_epilogue_dense_kernel");
}

void global_avg_pool(cudaStream_t s, const float* x, const int64_t (&sizes)[4], const int64_t (&sx)[4], float* y,
                     const int64_t (&sy)[2]) {
  // One warp per (n, c) plane, as strata launches it: the plane's sum is the warp's, in a fixed order.
  const int64_t planes = sizes[0] * sizes[1];
  if (planes == 0) return;
  gap_fwd_kernel<float><<<static_cast<unsigned>((planes * 32 + 255) / 256), 256, 0, s>>>(
      x, sizes[0], sizes[1], sizes[2], sizes[3], sx[0], sx[1], sx[2], sx[3], y, sy[0], sy[1]);
  check_launch("gap_fwd_kernel");
}

void convert(cudaStream_t s, int nd, int64_t n, const int64_t* sizes, const int64_t* src_strides,
             const int64_t* dst_strides, const float* src, float* dst) {
  if (n <= 0) return;
  Strided<2> st;
  st.nd = nd;
  st.n = n;
  for (int d = 0; d < nd; ++d) {
    st.sizes[d] = sizes[d];
    st.strides[0][d] = src_strides[d];
    st.strides[1][d] = dst_strides[d];
  }
  elementwise_kernel<2, ConvertFn<float, float>><<<grid(n), kThreads, 0, s>>>(st, ConvertFn<float, float>{src, dst});
  check_launch("elementwise_kernel (convert)");
}

template <int V>
void gemv_rows(cudaStream_t s, const GemvParams<float>& p) {
  const unsigned blocks = static_cast<unsigned>((p.n * 32 + kGemvThreads - 1) / kGemvThreads);
  switch (p.m) {
    case 1: gemv_kernel<float, V, 1><<<blocks, kGemvThreads, 0, s>>>(p); break;
    case 2: gemv_kernel<float, V, 2><<<blocks, kGemvThreads, 0, s>>>(p); break;
    case 3: gemv_kernel<float, V, 3><<<blocks, kGemvThreads, 0, s>>>(p); break;
    default: gemv_kernel<float, V, 4><<<blocks, kGemvThreads, 0, s>>>(p); break;
  }
  check_launch("gemv_kernel");
}

void gemv(cudaStream_t s, int v, const float* x, const float* w, const float* b, float* y, int64_t m, int64_t n,
          int64_t k, int64_t ldx, int64_t ldw, int64_t bs, int64_t ys0, int64_t ys1) {
  if (m < 1 || m > 4) throw std::runtime_error("gemv: 1 to 4 rows, got " + std::to_string(m));
  const GemvParams<float> p{x, w, b, y, m, n, k, ldx, ldw, bs, ys0, ys1};
  if (v == 4)
    gemv_rows<4>(s, p);
  else
    gemv_rows<1>(s, p);
}

void space_to_depth(cudaStream_t s, const float* x, const int64_t (&xs)[4], const int64_t (&xst)[4], float* y,
                    const int64_t (&ys)[4], const int64_t (&yst)[4], int block, int pad_h, int pad_w) {
  // Data movement only: 64-bit indices where strata may take 32-bit ones move the same elements.
  using I = uint64_t;
  const int64_t total = ys[0] * ys[1] * ys[2] * ys[3];
  if (total == 0) return;
  const auto c = [](int64_t v) { return static_cast<I>(v); };
  const S2dGeom<I> g{c(xs[0]),  c(xs[1]),  c(xs[2]),  c(xs[3]),  c(ys[1]),  c(ys[2]),    c(ys[3]),
                     c(xst[0]), c(xst[1]), c(xst[2]), c(xst[3]), c(yst[0]), c(yst[1]),   c(yst[2]),
                     c(yst[3]), c(block),  c(pad_h),  c(pad_w),  yst[1] == 1 && ys[1] > 1};
  space_to_depth_kernel<float, I><<<grid(total), kThreads, 0, s>>>(x, y, g, static_cast<I>(total));
  check_launch("space_to_depth_kernel");
}

}  // namespace generated::kernels
)cg";
}

std::string main_cpp() {
  return R"cg(// Runs the generated model on a tensor file: reads a NumPy .npy input (float32, C order, the
// shape the code was generated for), writes the output as .npy. With REPEAT, also runs the model
// that many more times and prints the median time of one run (input copied in, output copied
// out, as strata's predict), then times the forward alone as many times on the resident input: the
// host's time to enqueue it, the device's (CUDA events around it) and the two with the wait.
// --no-graph runs the calls one by one instead of the CUDA graph captured at load, so that both can
// be timed.
//   model_run weights.bin input.npy output.npy [REPEAT] [--no-graph]
// Exit status: 0 done, 1 an error (said on stderr), 2 a usage error.
)cg" + npy_helpers() + R"cg(#include <cuda_runtime_api.h>

int main(int argc, char** argv) {
  bool graph = true;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--no-graph")
      graph = false;
    else
      args.push_back(argv[i]);
  }
  const int repeat = args.size() == 4 ? std::atoi(args[3].c_str()) : 0;
  if ((args.size() != 3 && args.size() != 4) || repeat < 0 || (args.size() == 4 && repeat == 0)) {
    std::fprintf(stderr, "usage: %s WEIGHTS INPUT.npy OUTPUT.npy [REPEAT > 0] [--no-graph]\n", argv[0]);
    return 2;
  }
  try {
    const std::vector<int64_t> in_shape(std::begin(generated::kInputSizes), std::end(generated::kInputSizes));
    const std::vector<int64_t> out_shape(std::begin(generated::kOutputSizes), std::end(generated::kOutputSizes));
    const std::vector<float> x = read_npy<float>(args[1], in_shape);
    generated::Model model(args[0], graph);
    int64_t n = 1;
    for (int64_t d : out_shape) n *= d;
    std::vector<float> y(static_cast<size_t>(n));
    model.run(x.data(), y.data());
    write_npy(args[2], out_shape, y);
    if (repeat > 0) {
      std::vector<double> ms;
      for (int i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        model.run(x.data(), y.data());
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf("time per run: %.3f ms median (min %.3f, max %.3f) over %d runs after 1, %s\n", ms[ms.size() / 2],
                  ms.front(), ms.back(), repeat, graph ? "CUDA graph" : "no graph");
      std::vector<double> host, device, wall;
      cudaEvent_t start = nullptr, end = nullptr;
      if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&end) != cudaSuccess)
        throw std::runtime_error("cudaEventCreate failed");
      for (int i = 0; i < repeat; ++i) {
        // One forward timed by the host (to enqueue it; with the wait), the next by events on its stream.
        const auto t0 = std::chrono::steady_clock::now();
        cudaStream_t s = static_cast<cudaStream_t>(model.launch());
        const auto t1 = std::chrono::steady_clock::now();
        if (cudaStreamSynchronize(s) != cudaSuccess) throw std::runtime_error("the forward failed on the device");
        const auto t2 = std::chrono::steady_clock::now();
        cudaEventRecord(start, s);
        model.launch();
        cudaEventRecord(end, s);
        if (cudaEventSynchronize(end) != cudaSuccess) throw std::runtime_error("the forward failed on the device");
        float dev = 0.f;
        cudaEventElapsedTime(&dev, start, end);
        host.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        wall.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
        device.push_back(dev);
      }
      cudaEventDestroy(start);
      cudaEventDestroy(end);
      for (auto* v : {&host, &device, &wall}) std::sort(v->begin(), v->end());
      std::printf("time per forward, input resident: host %.4f ms, device %.4f ms, wall %.4f ms median over %d, %s\n",
                  host[host.size() / 2], device[device.size() / 2], wall[wall.size() / 2], repeat,
                  graph ? "CUDA graph" : "no graph");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
}
)cg";
}

std::string cmake_lists(const std::string& project, const std::string& program) {
  return "# Generated by strata_codegen: builds the model as a static library and " + program + ", its\n"
         "# command-line program. Needs the CUDA toolkit (runtime, cuBLAS) and cuDNN only; a cuDNN\n"
         "# outside the toolkit is found with -DCUDNN_ROOT=<folder with include/ and lib/>.\n"
         "cmake_minimum_required(VERSION 3.18)\n"
         "project(" + project + " LANGUAGES CXX CUDA)\n"
         "set(CMAKE_CXX_STANDARD 17)\n"
         "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n"
         "set(CMAKE_CUDA_STANDARD 17)\n"
         "if(NOT CMAKE_BUILD_TYPE)\n"
         "  set(CMAKE_BUILD_TYPE Release)\n"
         "endif()\n"
         "if(NOT CMAKE_CUDA_ARCHITECTURES)\n"
         "  set(CMAKE_CUDA_ARCHITECTURES native)\n"
         "endif()\n"
         "find_package(CUDAToolkit REQUIRED)\n"
         "find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)\n"
         "# NAMES_PER_DIR: CUDNN_ROOT's libcudnn.so.9 (pip's wheels have no libcudnn.so) before another's libcudnn.so.\n"
         "find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR HINTS ${CUDNN_ROOT}\n"
         "             ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)\n"
         "if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)\n"
         "  message(FATAL_ERROR \"cuDNN not found (cudnn.h and libcudnn): pass -DCUDNN_ROOT=<its folder>\")\n"
         "endif()\n"
         "add_library(model STATIC model.cpp kernels.cu weights.cpp)\n"
         "target_include_directories(model PUBLIC ${CUDNN_INCLUDE_DIR})\n"
         "target_link_libraries(model PUBLIC CUDA::cudart CUDA::cublas ${CUDNN_LIBRARY})\n"
         "add_executable(" + program + " main.cpp)\n"
         "target_link_libraries(" + program + " PRIVATE model)\n";
}

}  // namespace strata::codegen::cuda
