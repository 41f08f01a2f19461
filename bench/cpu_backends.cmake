# The CPU backends' micro benchmark (conv 3x3 on each CPU backend vs the raw sgemm of
# the same size, ReLU call cost). Included from bench/CMakeLists.txt.
add_executable(cpu_backends_bench ${CMAKE_CURRENT_LIST_DIR}/cpu_backends_bench.cpp)
target_link_libraries(cpu_backends_bench PRIVATE strata_backends strata_core benchmark::benchmark)
if(STRATA_WITH_OPENBLAS_ENABLED)
  target_link_libraries(cpu_backends_bench PRIVATE ${BLAS_LIBRARIES})
  target_include_directories(cpu_backends_bench PRIVATE ${OPENBLAS_CBLAS_INCLUDE})
  target_compile_definitions(cpu_backends_bench PRIVATE STRATA_BENCH_CBLAS=1)
endif()
if(STRATA_WITH_ONEDNN_ENABLED)
  target_link_libraries(cpu_backends_bench PRIVATE DNNL::dnnl)
endif()
if(STRATA_WITH_EIGEN_ENABLED)
  # Eigen's contraction, built for the same CPU as the eigen backend's sources.
  target_link_libraries(cpu_backends_bench PRIVATE Eigen3::Eigen)
  if(STRATA_EIGEN_ARCH AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(cpu_backends_bench PRIVATE -march=${STRATA_EIGEN_ARCH})
  endif()
endif()
