# The abstraction-cost study's strata driver (docs/study.md), built with the cuda
# backend only, like resnet50_gpu whose support library it shares; its --backend
# reference runs the same code on the CPU for smoke tests. The LibTorch peer in
# libtorch/ is its own CMake project, built on the GPU machine (tools/gpu/study.sh).
# Included from bench/CMakeLists.txt after resnet50_gpu.cmake.
if(STRATA_WITH_CUDA_ENABLED)
  add_executable(study_resnet50
    ${CMAKE_CURRENT_LIST_DIR}/study_resnet50.cpp
    ${CMAKE_CURRENT_LIST_DIR}/driver_common.cpp
    ${CMAKE_CURRENT_LIST_DIR}/sweep.cpp
    ${CMAKE_CURRENT_LIST_DIR}/parity.cpp
    ${CMAKE_CURRENT_LIST_DIR}/op_costs.cpp
    ${CMAKE_CURRENT_LIST_DIR}/nvml.cpp)
  target_link_libraries(study_resnet50 PRIVATE strata_bench_resnet50 CLI11::CLI11 CUDA::cudart ${CMAKE_DL_LIBS})
endif()
