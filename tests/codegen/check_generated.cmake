# Runs a built generated project (OUT) on the input strata_codegen --check wrote and
# requires strata's own output byte for byte (again after a second run in the same
# process); requires that the program links no strata library; and that it names what is
# wrong with a bad input or weights file.
if(NOT DEFINED OUT)
  message(FATAL_ERROR "check_generated.cmake: -DOUT= is required")
endif()
set(run ${OUT}/build/model_run)

# model_run WEIGHTS INPUT OUTPUT [REPEAT]: fails unless it succeeds and writes strata's output.
function(expect_strata_output output)
  file(REMOVE ${OUT}/${output})
  execute_process(COMMAND ${run} ${OUT}/weights.bin ${OUT}/check/input.npy ${OUT}/${output} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "model_run ${ARGN} failed (${rc}): ${err}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/${output} ${OUT}/check/expected.npy
                  RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "the generated program's ${OUT}/${output} (model_run ${ARGN}) is not bitwise strata's "
                        "${OUT}/check/expected.npy")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# model_run WEIGHTS INPUT: fails unless it fails naming the problem (a regular expression).
function(expect_refusal weights input pattern)
  execute_process(COMMAND ${run} ${weights} ${input} ${OUT}/refused.npy RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "model_run ${weights} ${input}: status ${rc}, message \"${err}\" lacks \"${pattern}\"")
  endif()
endfunction()

expect_strata_output(output.npy)
# REPEAT times further runs; the output written after the first must not change.
expect_strata_output(output_repeat.npy 3)
if(NOT run_output MATCHES "time per run: [0-9.]+ ms median .* over 3 runs")
  message(FATAL_ERROR "model_run with REPEAT 3 printed no timing: ${run_output}")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/links_no_strata.cmake)
expect_links_no_strata(${run})

# Bad inputs are named: another shape (the expected output as input; for a model of token ids,
# another dtype), a token id outside the vocabulary, a file that is no .npy, and weights that are
# not the generated code's.
if(EXISTS ${OUT}/check/tokens_out_of_range.npy)
  expect_refusal(${OUT}/weights.bin ${OUT}/check/expected.npy "expected.npy: dtype '<f4', but the model takes int64")
  expect_refusal(${OUT}/weights.bin ${OUT}/check/tokens_out_of_range.npy
                 "tokens_out_of_range.npy: token [0-9]+ is [0-9]+, out of range \\[0, [0-9]+\\)")
else()
  expect_refusal(${OUT}/weights.bin ${OUT}/check/expected.npy
                 "expected.npy: shape \\([0-9, ]+\\), but the model was generated for \\([0-9, ]+\\)")
endif()
expect_refusal(${OUT}/weights.bin ${OUT}/weights.bin "weights.bin: not a NumPy .npy file")
expect_refusal(${OUT}/check/input.npy ${OUT}/check/input.npy "input.npy: not a weights file of this generated code")
