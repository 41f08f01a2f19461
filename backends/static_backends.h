#pragma once
// The backend classes this build compiled in, for static and direct dispatch: X(Type) for each, in
// STRATA_FOR_EACH_BACKEND(X). Which ones is said by STRATA_HAVE_BACKEND_<NAME>, which the build defines
// for everything that links strata::backends (cmake/StrataBackend.cmake; the installed CMake package and
// strata.pc carry the same definitions), so this header is the same file in the source tree, the build
// and the install, and reads without a build.
#include "strata/backends/null/null_backend.h"
#include "strata/backends/reference/reference_backend.h"

#ifdef STRATA_HAVE_BACKEND_OPENBLAS
#include "strata/backends/openblas/openblas_backend.h"
#define STRATA_BACKEND_IF_OPENBLAS(X) X(::strata::backends::OpenBlasBackend)
#else
#define STRATA_BACKEND_IF_OPENBLAS(X)
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
#include "strata/backends/eigen/eigen_backend.h"
#define STRATA_BACKEND_IF_EIGEN(X) X(::strata::backends::EigenBackend)
#else
#define STRATA_BACKEND_IF_EIGEN(X)
#endif
#ifdef STRATA_HAVE_BACKEND_ONEDNN
#include "strata/backends/onednn/onednn_backend.h"
#define STRATA_BACKEND_IF_ONEDNN(X) X(::strata::backends::OneDnnBackend)
#else
#define STRATA_BACKEND_IF_ONEDNN(X)
#endif
#ifdef STRATA_HAVE_BACKEND_CUDA
#include "strata/backends/cuda/cuda_backend.h"
#define STRATA_BACKEND_IF_CUDA(X) X(::strata::backends::CudaBackend)
#else
#define STRATA_BACKEND_IF_CUDA(X)
#endif

// In the order the build adds them (the registry's order).
#define STRATA_FOR_EACH_BACKEND(X)                                                                \
  X(::strata::backends::ReferenceBackend) X(::strata::backends::NullBackend)                     \
  STRATA_BACKEND_IF_OPENBLAS(X) STRATA_BACKEND_IF_EIGEN(X) STRATA_BACKEND_IF_ONEDNN(X) STRATA_BACKEND_IF_CUDA(X)
