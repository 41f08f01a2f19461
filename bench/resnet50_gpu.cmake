# The ResNet-50 GPU study (bench/resnet50_gpu.cpp) and its checkpoint round trip with
# torchvision (bench/export_resnet50.cpp); built only with the cuda backend. The
# PyTorch side is bench/peers/pytorch_resnet50.py; tools/gpu/bench.sh runs them all.
# Included from bench/CMakeLists.txt.
if(STRATA_WITH_CUDA_ENABLED)
  find_package(CLI11 CONFIG REQUIRED)
  find_package(nlohmann_json CONFIG REQUIRED)
  # Step timer, stream gate, random inputs, device description: shared with bench/study/ and gpt2_forward.
  add_library(strata_bench_resnet50 STATIC ${CMAKE_CURRENT_LIST_DIR}/resnet50_support.cpp
              ${CMAKE_CURRENT_LIST_DIR}/trace_summary.cpp ${CMAKE_CURRENT_LIST_DIR}/stream_gate.cpp)
  target_include_directories(strata_bench_resnet50 PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  # CUDA events around each step (the runtime only: no CUDA header reaches strata's).
  target_link_libraries(strata_bench_resnet50 PUBLIC strata::strata nlohmann_json::nlohmann_json PRIVATE CUDA::cudart)
  add_executable(resnet50_gpu ${CMAKE_CURRENT_LIST_DIR}/resnet50_gpu.cpp)
  target_link_libraries(resnet50_gpu PRIVATE strata_bench_resnet50 CLI11::CLI11 CUDA::cudart)
  # Which cuDNN engines take a convolution that also writes its output's batch-norm statistics
  # (docs/results/gpu_fused_train.md): the backend's internal graph helpers, cuDNN linked directly.
  add_executable(conv_stats_probe ${CMAKE_CURRENT_LIST_DIR}/conv_stats_probe.cpp)
  target_include_directories(conv_stats_probe PRIVATE ${CUDNN_INCLUDE_DIR})
  target_link_libraries(conv_stats_probe PRIVATE strata::strata CLI11::CLI11 nlohmann_json::nlohmann_json CUDA::cudart
                        ${CUDNN_LIBRARY})
  add_executable(export_resnet50 ${CMAKE_CURRENT_LIST_DIR}/export_resnet50.cpp)
  target_link_libraries(export_resnet50 PRIVATE strata::strata CLI11::CLI11 nlohmann_json::nlohmann_json)
  # Data-parallel ResNet over NCCL (dist/): throughput on N GPUs and the 2-GPU check.
  if(TARGET strata_dist)
    add_executable(dist_resnet ${CMAKE_CURRENT_LIST_DIR}/dist_resnet.cpp)
    target_link_libraries(dist_resnet PRIVATE strata_bench_resnet50 strata_dist CLI11::CLI11)
  endif()
endif()
