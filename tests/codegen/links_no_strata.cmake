# expect_links_no_strata(PROGRAM): fails unless ldd lists oneDNN and no strata library for a
# generated program (included by check_generated.cmake and check_train.cmake).
function(expect_links_no_strata program)
  find_program(LDD ldd REQUIRED)
  execute_process(COMMAND ${LDD} ${program} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT libs MATCHES "libdnnl")
    message(FATAL_ERROR "ldd ${program} failed or lists no oneDNN (${rc}):\n${libs}")
  endif()
  if(libs MATCHES "strata")
    message(FATAL_ERROR "the generated program links a strata library:\n${libs}")
  endif()
endfunction()
