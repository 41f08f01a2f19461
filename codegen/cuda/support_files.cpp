#include "strata/codegen/cuda/support_files.h"

#include "strata/codegen/project_files.h"
#include "strata/core/shape.h"

namespace strata::codegen::cuda {

std::string main_cpp(bool token_ids) {
  const std::string in_type = token_ids ? "int64_t" : "float";
  return std::string(token_ids ? "// Runs the generated model on a tensor file: reads a NumPy .npy input (int64 token ids in\n"
                                 "// [0, kInputLimit), C order, the shape the code was generated for), writes the logits (float32)"
                               : "// Runs the generated model on a tensor file: reads a NumPy .npy input (float32, C order, the\n"
                                 "// shape the code was generated for), writes the output") + R"cg(
// as .npy. With REPEAT, also runs the model that many more times and prints the median time of one
// run (input copied in, output copied out, as strata's predict: from and into page-locked host memory,
// which strata's cuda backend gives its host tensors), then times the forward alone as many times on
// the resident input: the host's time to enqueue it, the device's (CUDA events around it) and the
// two with the wait.
// --no-graph runs the calls one by one instead of the CUDA graph captured at load, so that both can
// be timed.
//   model_run weights.bin input.npy output.npy [REPEAT] [--no-graph]
// Exit status: 0 done, 1 an error (said on stderr), 2 a usage error.
)cg" + npy_helpers() + (token_ids ? range_check() : std::string()) + R"cg(#include <cuda_runtime_api.h>

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
)cg" + "    const std::vector<" + in_type + "> x = read_npy<" + in_type + ">(args[1], in_shape);\n" +
         (token_ids ? "    check_range(x, generated::kInputLimit, args[1], \"token\");\n" : "") + R"cg(    generated::Model model(args[0], graph);
    int64_t n = 1;
    for (int64_t d : out_shape) n *= d;
    std::vector<float> y(static_cast<size_t>(n));
    model.run(x.data(), y.data());
    write_npy(args[2], out_shape, y);
    if (repeat > 0) {
      void* xp = nullptr;
      void* yp = nullptr;
      if (cudaMallocHost(&xp, x.size() * sizeof(x[0])) != cudaSuccess ||
          cudaMallocHost(&yp, y.size() * sizeof(float)) != cudaSuccess)
        throw std::runtime_error("cudaMallocHost failed");
      std::memcpy(xp, x.data(), x.size() * sizeof(x[0]));
      std::vector<double> ms;
      for (int i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        model.run(static_cast<const )cg" + in_type + R"cg(*>(xp), static_cast<float*>(yp));
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      cudaFreeHost(xp);
      cudaFreeHost(yp);
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
         "# The CUDA runtime as the shared library CUDA::cudart links, without its static copy as well.\n"
         "set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)\n"
         "# Machine code only, no PTX beside it: a plain architecture number N becomes N-real (pass\n"
         "# N-virtual too for PTX that a later GPU can compile).\n"
         "set(MODEL_CUDA_ARCHITECTURES)\n"
         "foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)\n"
         "  if(arch MATCHES \"^[0-9]+[af]?$\")\n"
         "    set(arch ${arch}-real)\n"
         "  endif()\n"
         "  list(APPEND MODEL_CUDA_ARCHITECTURES ${arch})\n"
         "endforeach()\n"
         "add_library(model STATIC model.cpp kernels.cu weights.cpp)\n"
         "set_target_properties(model PROPERTIES CUDA_ARCHITECTURES \"${MODEL_CUDA_ARCHITECTURES}\")\n"
         "target_include_directories(model PUBLIC ${CUDNN_INCLUDE_DIR})\n"
         "target_link_libraries(model PUBLIC CUDA::cudart CUDA::cublas ${CUDNN_LIBRARY})\n"
         "add_executable(" + program + " main.cpp)\n"
         "target_link_libraries(" + program + " PRIVATE model)\n";
}

}  // namespace strata::codegen::cuda
