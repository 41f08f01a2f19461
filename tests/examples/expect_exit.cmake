# Runs one command and checks its exit status and output (stdout and stderr together):
#   cmake -DEXPECT=<status> [-DMATCH=<regex>] -DCMD=<program;arg;...> -P expect_exit.cmake
# The programs' statuses follow core/exit_status.h: 0 done, 1 a runtime error, 2 a usage error.
if(NOT DEFINED EXPECT OR NOT DEFINED CMD)
  message(FATAL_ERROR "expect_exit: -DEXPECT= and -DCMD= are required")
endif()
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT "${rc}" STREQUAL "${EXPECT}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT}, from: ${CMD}\n${all}")
endif()
if(DEFINED MATCH AND NOT all MATCHES "${MATCH}")
  message(FATAL_ERROR "the output of ${CMD} does not match '${MATCH}':\n${all}")
endif()
message(STATUS "exit status ${rc} as expected")
