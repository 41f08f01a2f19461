# Runs a built generated project (OUT) on the input strata_codegen --check wrote and
# requires strata's own output byte for byte; requires that the program links no strata
# library; and that it names what is wrong with a bad input file.
if(NOT DEFINED OUT)
  message(FATAL_ERROR "check_generated.cmake: -DOUT= is required")
endif()
set(run ${OUT}/build/model_run)
file(REMOVE ${OUT}/output.npy)
execute_process(COMMAND ${run} ${OUT}/weights.bin ${OUT}/check/input.npy ${OUT}/output.npy RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "model_run failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/output.npy ${OUT}/check/expected.npy
                RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "the generated program's output ${OUT}/output.npy is not bitwise strata's ${OUT}/check/expected.npy")
endif()

# REPEAT times the run (and must give the same output again).
execute_process(COMMAND ${run} ${OUT}/weights.bin ${OUT}/check/input.npy ${OUT}/output2.npy 3 RESULT_VARIABLE rc
                OUTPUT_VARIABLE timing ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT timing MATCHES "time per run: [0-9.]+ ms median .* over 3 runs")
  message(FATAL_ERROR "model_run with REPEAT 3: status ${rc}, output: ${timing}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/output2.npy ${OUT}/check/expected.npy
                RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "a second Model::run in one process gave another output than the first")
endif()

find_program(LDD ldd REQUIRED)
execute_process(COMMAND ${LDD} ${run} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT libs MATCHES "libdnnl")
  message(FATAL_ERROR "ldd ${run} failed or lists no oneDNN (${rc}):\n${libs}")
endif()
if(libs MATCHES "strata")
  message(FATAL_ERROR "the generated program links a strata library:\n${libs}")
endif()

# Bad inputs are named: another shape (the expected output as input) and a file that is no .npy.
execute_process(COMMAND ${run} ${OUT}/weights.bin ${OUT}/check/expected.npy ${OUT}/bad.npy RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "expected.npy: shape \\([0-9, ]+\\), but the model was generated for \\([0-9, ]+\\)")
  message(FATAL_ERROR "model_run on an input of the wrong shape: status ${rc}, message: ${err}")
endif()
execute_process(COMMAND ${run} ${OUT}/weights.bin ${OUT}/weights.bin ${OUT}/bad.npy RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "weights.bin: not a NumPy .npy file")
  message(FATAL_ERROR "model_run on a file that is not .npy: status ${rc}, message: ${err}")
endif()
execute_process(COMMAND ${run} ${OUT}/check/input.npy ${OUT}/check/input.npy ${OUT}/bad.npy RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "input.npy: not a weights file of this generated code")
  message(FATAL_ERROR "model_run with a file that is not its weights: status ${rc}, message: ${err}")
endif()
