# expect_links_no_strata(PROGRAM): fails unless ldd lists the generated program's library (LIBRARY,
# a file name's start: libdnnl, the default, for the onednn emitter's programs, libcudnn for the cuda
# emitter's) and no strata library (included by check_generated.cmake and check_train.cmake).
if(NOT DEFINED LIBRARY)
  set(LIBRARY libdnnl)
endif()
function(expect_links_no_strata program)
  find_program(LDD ldd REQUIRED)
  execute_process(COMMAND ${LDD} ${program} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT libs MATCHES "${LIBRARY}")
    message(FATAL_ERROR "ldd ${program} failed or lists no ${LIBRARY} (${rc}):\n${libs}")
  endif()
  if(libs MATCHES "strata")
    message(FATAL_ERROR "the generated program links a strata library:\n${libs}")
  endif()
endfunction()
