# cmake -DSOURCE_DIR= -DWORK_DIR= -DGENERATOR= -DPACKAGE= -DBACKEND= -DINSTALL= -DOPTION=<var>=AUTO|ON
#       [-DKIND=backend|feature] -P
# Configures SOURCE_DIR with find_package(PACKAGE) disabled and checks the outcome the option asks for.
if(NOT KIND)
  set(KIND backend)
endif()
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -G ${GENERATOR}
                        -DCMAKE_DISABLE_FIND_PACKAGE_${PACKAGE}=TRUE -D${OPTION}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(log "${out}${err}")
string(REGEX REPLACE "[ \n]+" " " flat "${log}")  # CMake wraps error messages
file(REMOVE_RECURSE ${WORK_DIR})
if(OPTION MATCHES "=AUTO$")
  set(expected "strata: ${KIND} ${BACKEND} skipped: .* not found; install ${INSTALL}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configure with ${PACKAGE} disabled and ${OPTION} failed (${rc}):\n${log}")
  endif()
else()
  set(expected "strata: ${KIND} ${BACKEND} cannot be built: .* not found; install ${INSTALL}")
  if(rc EQUAL 0)
    message(FATAL_ERROR "configure with ${PACKAGE} disabled and ${OPTION} succeeded; it must fail:\n${log}")
  endif()
endif()
if(NOT flat MATCHES "${expected}")
  message(FATAL_ERROR "configure output does not match '${expected}':\n${log}")
endif()
if(flat MATCHES "strata: ${KIND} '${BACKEND}' will be built")
  message(FATAL_ERROR "${KIND} ${BACKEND} was built although ${PACKAGE} was disabled:\n${log}")
endif()
message(STATUS "ok: ${PACKAGE} disabled, ${OPTION}: configure said what to install (${INSTALL})")
