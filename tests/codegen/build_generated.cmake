# Configures and builds a generated project (OUT) on its own, as its user would: with
# CMake, oneDNN and nothing of strata. LAUNCHER (optional): strata's compiler launcher
# (ccache), so a rerun with the same generated code compiles nothing.
foreach(var OUT GENERATOR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "build_generated.cmake: -D${var}= is required")
  endif()
endforeach()
set(launcher)
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${OUT} -B ${OUT}/build -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
                        ${launcher} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the generated project ${OUT} failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${OUT}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the generated project ${OUT} failed (${rc})")
endif()
