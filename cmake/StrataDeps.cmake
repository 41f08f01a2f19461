# Finds the optional backend dependencies and resolves STRATA_WITH_* (AUTO/ON/OFF).
# Each probe sets a "found" flag and, when something is missing, what is missing and which Debian
# packages provide it; strata_backend_option turns that into a skip (AUTO) or an error (ON).
# A dependency's own CMake package is only loaded once what it requires is known to be there, so a
# missing optional dependency never becomes a configure error under AUTO.

# OpenBLAS (Debian libopenblas-dev)
set(_openblas_found FALSE)
if(NOT STRATA_WITH_OPENBLAS STREQUAL "OFF")
  find_package(BLAS QUIET)
  find_path(OPENBLAS_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas openblas-pthread openblas-openmp)
  if(BLAS_FOUND AND OPENBLAS_CBLAS_INCLUDE)
    set(_openblas_found TRUE)
  endif()
endif()
strata_backend_option(STRATA_WITH_OPENBLAS ${_openblas_found} openblas
  MISSING "OpenBLAS (a BLAS library and cblas.h)" INSTALL "libopenblas-dev")

# Eigen 3.4 (Debian libeigen3-dev): header-only; its Tensor module (unsupported/) comes with it.
set(_eigen_found FALSE)
if(NOT STRATA_WITH_EIGEN STREQUAL "OFF")
  find_package(Eigen3 3.4 QUIET NO_MODULE)
  if(TARGET Eigen3::Eigen)
    set(_eigen_found TRUE)
  endif()
endif()
strata_backend_option(STRATA_WITH_EIGEN ${_eigen_found} eigen
  MISSING "Eigen 3.4 (Eigen3Config.cmake)" INSTALL "libeigen3-dev")

# oneDNN (Debian libdnnl-dev). Debian's dnnl-config.cmake is built with the OpenCL GPU runtime and
# calls find_package(OpenCL REQUIRED), which fails the whole configure when OpenCL is absent; read
# which runtimes the package was built with and look for them first.
set(_onednn_found FALSE)
set(_onednn_missing "oneDNN's CMake package (dnnl-config.cmake)")
set(_onednn_install "libdnnl-dev")
if(NOT STRATA_WITH_ONEDNN STREQUAL "OFF" AND NOT CMAKE_DISABLE_FIND_PACKAGE_dnnl)
  find_file(STRATA_DNNL_CONFIG NAMES dnnl-config.cmake dnnlConfig.cmake
            HINTS ${dnnl_DIR} ENV dnnl_DIR
            PATHS ${CMAKE_PREFIX_PATH} ${CMAKE_SYSTEM_PREFIX_PATH}
            PATH_SUFFIXES lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/dnnl lib/cmake/dnnl lib64/cmake/dnnl
            NO_CACHE)
  if(STRATA_DNNL_CONFIG)
    file(STRINGS "${STRATA_DNNL_CONFIG}" _dnnl_runtimes REGEX "set\\(DNNL_(GPU|CPU_THREADING)_RUNTIME")
    set(_dnnl_prereqs_found TRUE)
    if(_dnnl_runtimes MATCHES "DNNL_GPU_RUNTIME \"OCL\"")
      find_package(OpenCL QUIET)
      if(NOT OpenCL_FOUND)
        set(_dnnl_prereqs_found FALSE)
        set(_onednn_missing "OpenCL headers and ICD loader (this oneDNN package was built with the OpenCL GPU runtime and its CMake package requires them)")
        set(_onednn_install "ocl-icd-opencl-dev opencl-headers")
      endif()
    endif()
    if(_dnnl_runtimes MATCHES "DNNL_CPU_THREADING_RUNTIME \"TBB\"")
      find_package(TBB QUIET)
      if(NOT TBB_FOUND)
        set(_dnnl_prereqs_found FALSE)
        set(_onednn_missing "oneTBB (this oneDNN package was built with the TBB threading runtime)")
        set(_onednn_install "libtbb-dev")
      endif()
    endif()
    if(_dnnl_prereqs_found)
      find_package(dnnl QUIET CONFIG)
      if(TARGET DNNL::dnnl)
        set(_onednn_found TRUE)
      endif()
    endif()
  endif()
endif()
strata_backend_option(STRATA_WITH_ONEDNN ${_onednn_found} onednn
  MISSING "${_onednn_missing}" INSTALL "${_onednn_install}")

# ONNX export/import (Debian libonnx-dev, libprotobuf-dev): ONNX's CMake package names protobuf's
# target without finding protobuf itself, so protobuf comes first.
set(_onnx_found FALSE)
set(_onnx_missing "protobuf (libprotobuf and its headers)")
if(NOT STRATA_WITH_ONNX STREQUAL "OFF")
  find_package(Protobuf QUIET)
  if(TARGET protobuf::libprotobuf)
    set(_onnx_missing "ONNX's CMake package (ONNXConfig.cmake)")
    find_package(ONNX QUIET CONFIG)
    if(TARGET onnx_proto AND TARGET onnx)
      set(_onnx_found TRUE)
    endif()
  endif()
endif()
strata_backend_option(STRATA_WITH_ONNX ${_onnx_found} onnx KIND feature
  MISSING "${_onnx_missing}" INSTALL "libonnx-dev libprotobuf-dev")
if(STRATA_WITH_ONNX_ENABLED)
  message(STATUS "strata: feature 'onnx' will be built (ONNX ${ONNX_VERSION}, protobuf ${Protobuf_VERSION})")
endif()

# CUDA toolkit + cuDNN + cuBLAS
set(_cuda_found FALSE)
set(_cuda_missing "a CUDA compiler (nvcc)")
if(NOT STRATA_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(_cuda_missing "the CUDA toolkit's CMake package (CUDAToolkit)")
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      set(_cuda_missing "cuDNN (cudnn.h and libcudnn)")
      find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
      find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
      if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
        set(_cuda_found TRUE)
      endif()
    endif()
  endif()
endif()
strata_backend_option(STRATA_WITH_CUDA ${_cuda_found} cuda
  MISSING "${_cuda_missing}" INSTALL "the CUDA toolkit and cuDNN from NVIDIA (/usr/local/cuda; not Debian packages)")
# NCCL (data-parallel training, dist/): needs the cuda backend. NVIDIA ships it with the CUDA
# toolkit or as a package (libnccl-dev); PyTorch's wheels carry a copy too.
set(_nccl_found FALSE)
set(_nccl_missing "the cuda backend (STRATA_WITH_CUDA)")
if(NOT STRATA_WITH_NCCL STREQUAL "OFF" AND STRATA_WITH_CUDA_ENABLED)
  set(_nccl_missing "NCCL (nccl.h and libnccl)")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_nccl_found TRUE)
  endif()
endif()
strata_backend_option(STRATA_WITH_NCCL ${_nccl_found} dist KIND feature
  MISSING "${_nccl_missing}" INSTALL "NCCL from NVIDIA (libnccl-dev, or the CUDA toolkit's) and the cuda backend")
if(STRATA_WITH_NCCL_ENABLED)
  message(STATUS "strata: feature 'dist' will be built (NCCL: ${NCCL_LIBRARY})")
endif()

# MPI (Debian libopenmpi-dev; mpirun from openmpi-bin): a job started by mpirun receives NCCL's unique
# id from rank 0 by MPI_Bcast instead of through a shared file (dist/mpi_bootstrap.cpp). Independent of
# CUDA and NCCL, so the exchange is built and tested on machines without them. FindMPI looks for the C
# component only in a project with C enabled; no strata source is C.
set(_mpi_found FALSE)
if(NOT STRATA_WITH_MPI STREQUAL "OFF")
  enable_language(C)
  find_package(MPI QUIET COMPONENTS C)
  if(MPI_C_FOUND)
    set(_mpi_found TRUE)
  endif()
endif()
strata_backend_option(STRATA_WITH_MPI ${_mpi_found} mpi KIND feature
  MISSING "MPI for C (mpi.h and libmpi)" INSTALL "libopenmpi-dev openmpi-bin")
if(STRATA_WITH_MPI_ENABLED)
  message(STATUS "strata: feature 'mpi' will be built (MPI ${MPI_C_VERSION}: ${MPI_C_LIBRARIES}): "
                 "jobs started by mpirun need no id file")
endif()

# OpenMP threads the CPU backends' own loops; found here, at the top, so that its imported target is
# visible to every directory and to the package config.
if(STRATA_WITH_OPENBLAS_ENABLED OR STRATA_WITH_ONEDNN_ENABLED)
  find_package(OpenMP COMPONENTS CXX)
endif()

if(STRATA_WITH_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
endif()
