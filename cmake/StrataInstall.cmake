# Installs headers, libraries and an exported CMake package so that an outside
# project can `find_package(strata REQUIRED)` and link `strata::strata`.
include(CMakePackageConfigHelpers)

foreach(dir core ops backends autograd nn data)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "*.cuh" EXCLUDE)
endforeach()
install(DIRECTORY ${STRATA_GENERATED_DIR}/strata_generated DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata)

install(EXPORT strataTargets NAMESPACE strata:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/strataConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/strataConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/strataConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/strataConfig.cmake ${PROJECT_BINARY_DIR}/strataConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
