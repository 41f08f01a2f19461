# Installs headers, libraries, an exported CMake package (with one component per backend) and a
# pkg-config file, so that an outside project can `find_package(strata REQUIRED [COMPONENTS ...])` and
# link `strata::strata`, or build with `pkg-config --cflags --libs strata`.
include(CMakePackageConfigHelpers)

get_property(_entries GLOBAL PROPERTY STRATA_BACKENDS)
set(STRATA_BUILT_BACKENDS "")
foreach(e IN LISTS _entries)
  string(REPLACE "|" ";" parts "${e}")
  list(GET parts 0 name)
  list(APPEND STRATA_BUILT_BACKENDS ${name})
endforeach()

# 0.x: every minor version may break the ABI, so it is part of the SONAME (libstrata_core.so.0.1).
set(_strata_libs strata_nn strata_data strata_autograd strata_ops strata_backends)
foreach(b IN LISTS STRATA_BUILT_BACKENDS)
  list(APPEND _strata_libs strata_backend_${b})
endforeach()
list(APPEND _strata_libs strata_op_table strata_core)
if(TARGET strata_dist)
  list(PREPEND _strata_libs strata_dist strata_dist_buckets strata_dist_bootstrap)
endif()
set_target_properties(${_strata_libs} PROPERTIES VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})

set(_strata_header_dirs core ops backends autograd nn data)
if(TARGET strata_dist)
  list(APPEND _strata_header_dirs dist)
endif()
foreach(dir IN LISTS _strata_header_dirs)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "*.cuh" EXCLUDE)
endforeach()
# The umbrella header: a consumer writes #include <strata/strata.h>; only the include dir itself is
# on its path, never include/strata, whose folder names are generic.
install(FILES ${PROJECT_SOURCE_DIR}/strata/strata.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata)

# What the package config must find again for a consumer: with static libraries every private
# dependency of every layer is linked by the consumer.
set(STRATA_PACKAGE_STATIC OFF)
if(NOT BUILD_SHARED_LIBS)
  set(STRATA_PACKAGE_STATIC ON)
endif()
set(STRATA_PACKAGE_OPENMP OFF)
if(TARGET OpenMP::OpenMP_CXX)
  set(STRATA_PACKAGE_OPENMP ON)
endif()

install(EXPORT strataTargets NAMESPACE strata:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/strataConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/strataConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/strataConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/strataConfig.cmake ${PROJECT_BINARY_DIR}/strataConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)

# pkg-config: the same libraries in link order; static builds list their private dependencies too.
set(STRATA_PC_LIBS "")
foreach(l IN LISTS _strata_libs)
  string(APPEND STRATA_PC_LIBS " -l${l}")
endforeach()
set(STRATA_PC_LIBS_PRIVATE "")
if(STRATA_PACKAGE_STATIC)
  foreach(l IN LISTS BLAS_LIBRARIES TURBOJPEG_LIBRARY JPEG_LIBRARIES STB_LIBRARY PCRE2_LIBRARY)
    string(APPEND STRATA_PC_LIBS_PRIVATE " ${l}")
  endforeach()
  if(STRATA_WITH_ONEDNN_ENABLED)
    string(APPEND STRATA_PC_LIBS_PRIVATE " -ldnnl")
  endif()
  if(STRATA_PACKAGE_OPENMP)
    string(APPEND STRATA_PC_LIBS_PRIVATE " ${OpenMP_CXX_FLAGS}")
  endif()
  if(TARGET strata_dist AND STRATA_WITH_MPI_ENABLED)
    foreach(l IN LISTS MPI_C_LIBRARIES)
      string(APPEND STRATA_PC_LIBS_PRIVATE " ${l}")
    endforeach()
  endif()
  string(APPEND STRATA_PC_LIBS_PRIVATE " -lpugixml -lz")
endif()
# Relocatable: the prefix is found from the .pc file's own folder, so `cmake --install --prefix` anywhere works.
file(RELATIVE_PATH STRATA_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/strata.pc.in ${PROJECT_BINARY_DIR}/strata.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/strata.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
