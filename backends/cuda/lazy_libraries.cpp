// cuDNN, cuBLAS and cuBLASLt are opened (dlopen) when the cuda backend initialises a device, not when a program
// that links strata starts: a program that never uses a GPU never maps them (several hundred MB), the
// way PyTorch keeps CUDA libraries out of CPU-only processes. The backend's calls bind, inside this
// shared library only, to the definitions below (hidden visibility: nothing outside binds to them), each
// of which looks its symbol up once and forwards.
#include <dlfcn.h>

#include <cuda_runtime.h>
#pragma GCC visibility push(hidden)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#pragma GCC visibility pop

#include <mutex>
#include <string>

#include "strata/backends/cuda/lazy_libraries.h"
#include "strata/core/error.h"

#define STRATA_STR2(x) #x
#define STRATA_STR(x) STRATA_STR2(x)

namespace strata::backends::cuda {
namespace {

struct Library {
  const char* soname;
  const char* what;
  std::once_flag once;
  void* handle = nullptr;
  std::string error;
};

Library cudnn_lib{"libcudnn.so." STRATA_STR(CUDNN_MAJOR), "cuDNN " STRATA_STR(CUDNN_MAJOR), {}, nullptr, {}};
Library cublas_lib{"libcublas.so." STRATA_STR(CUBLAS_VER_MAJOR), "cuBLAS " STRATA_STR(CUBLAS_VER_MAJOR), {}, nullptr, {}};
Library cublaslt_lib{"libcublasLt.so." STRATA_STR(CUBLAS_VER_MAJOR), "cuBLASLt " STRATA_STR(CUBLAS_VER_MAJOR), {}, nullptr,
                     {}};

void* open(Library& lib) {
  std::call_once(lib.once, [&] {
    lib.handle = dlopen(lib.soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib.handle) {
      const char* e = dlerror();
      lib.error = e ? e : "unknown dlopen error";
    }
  });
  STRATA_CHECK(lib.handle != nullptr, "cuda backend: cannot load ", lib.soname, " (", lib.what, "): ", lib.error,
               "; install it or put its folder on LD_LIBRARY_PATH");
  return lib.handle;
}

void* symbol(Library& lib, const char* name) {
  void* s = dlsym(open(lib), name);
  STRATA_CHECK(s != nullptr, "cuda backend: ", lib.soname, " has no symbol ", name, " (", lib.what,
               " is older than the headers strata was built with?)");
  return s;
}

}  // namespace

void load_libraries() {
  open(cudnn_lib);
  open(cublas_lib);
  open(cublaslt_lib);
}

}  // namespace strata::backends::cuda

#pragma GCC visibility push(hidden)
#define STRATA_LAZY_FN(lib, R, name, params, args)                                                      \
  extern "C" R name params {                                                                            \
    static const auto fn = reinterpret_cast<R(*) params>(                                                \
        ::strata::backends::cuda::symbol(::strata::backends::cuda::lib##_lib, #name));                  \
    return fn args;                                                                                     \
  }
#include "strata/backends/cuda/lazy_libraries.def"
#undef STRATA_LAZY_FN
#pragma GCC visibility pop
