# strata_add_backend(<name> CLASS <C++ class> HEADER <header> [PROBE] SOURCES ... [LIBS ...])
# Adds the library strata_backend_<name>, records it for the generated registry (and strata::backends
# defines STRATA_HAVE_BACKEND_<NAME> for backends/static_backends.h), and says so at configure time.
# PROBE: the backend defines `std::string probe_backend_<name>()`, the registry's cheap "can it run
# here" (Registry::Probe).
# HEADER is the class header under the source tree (backends/<name>/...); the generated registry includes
# it as "strata/<HEADER>", as every header is included.
set_property(GLOBAL PROPERTY STRATA_BACKENDS "")

function(strata_add_backend name)
  cmake_parse_arguments(B "PROBE" "CLASS;HEADER" "SOURCES;LIBS" ${ARGN})
  set(target strata_backend_${name})
  add_library(${target} ${B_SOURCES})
  add_library(strata::backend_${name} ALIAS ${target})
  target_link_libraries(${target} PUBLIC strata_op_table PRIVATE ${B_LIBS})
  set_target_properties(${target} PROPERTIES EXPORT_NAME backend_${name})
  set_property(GLOBAL APPEND PROPERTY STRATA_BACKENDS "${name}|${B_CLASS}|${B_HEADER}|${B_PROBE}")
  install(TARGETS ${target} EXPORT strataTargets)
  message(STATUS "strata: backend '${name}' will be built")
endfunction()

# strata_backend_option(<var> <found> <backend> MISSING <what is missing> INSTALL <what to install>
#                       [KIND <word>])
# Resolves an AUTO/ON/OFF backend option against whether its dependency was found. AUTO skips the
# backend and ON fails, both with the same message naming the backend, what is missing and what to install.
# KIND names what is optional in the messages ("backend" unless given; "feature" for onnx).
function(strata_backend_option var found backend)
  cmake_parse_arguments(O "" "MISSING;INSTALL;KIND" "" ${ARGN})
  if(NOT O_KIND)
    set(O_KIND backend)
  endif()
  set(why "${O_MISSING} not found; install ${O_INSTALL}")
  if(${var} STREQUAL "OFF")
    message(STATUS "strata: ${O_KIND} ${backend} disabled (${var}=OFF)")
    set(${var}_ENABLED OFF PARENT_SCOPE)
  elseif(found)
    set(${var}_ENABLED ON PARENT_SCOPE)
  elseif(${var} STREQUAL "ON")
    message(FATAL_ERROR "strata: ${O_KIND} ${backend} cannot be built: ${why} (${var}=ON)")
  elseif(${var} STREQUAL "AUTO")
    message(STATUS "strata: ${O_KIND} ${backend} skipped: ${why} (${var}=AUTO)")
    set(${var}_ENABLED OFF PARENT_SCOPE)
  else()
    message(FATAL_ERROR "strata: ${var} is '${${var}}'; use AUTO, ON or OFF")
  endif()
endfunction()

function(strata_generate_backend_files out_dir)
  get_property(entries GLOBAL PROPERTY STRATA_BACKENDS)
  set(decls "")
  set(calls "")
  set(includes "")
  foreach(e IN LISTS entries)
    string(REPLACE "|" ";" parts "${e}")
    list(GET parts 0 name)
    list(GET parts 1 cls)
    list(GET parts 2 header)
    list(GET parts 3 probe)
    string(APPEND decls "BackendFactoryResult make_backend_${name}();\n")
    set(probe_arg "")
    if(probe)
      string(APPEND decls "std::string probe_backend_${name}();\n")
      set(probe_arg ", &probe_backend_${name}")
    endif()
    string(APPEND calls
           "  r.add_factory(\"${name}\", ::strata::backends::${cls}::kDevice, &make_backend_${name}${probe_arg});\n")
    string(APPEND includes "#include \"strata/${header}\"\n")
  endforeach()
  set(STRATA_BACKEND_DECLS "${decls}")
  set(STRATA_BACKEND_CALLS "${calls}")
  set(STRATA_BACKEND_INCLUDES "${includes}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/builtin_backends.cpp.in ${out_dir}/builtin_backends.cpp @ONLY)
endfunction()
