# Runs a built generated training step (OUT) on the batch strata_codegen --train --check wrote:
# model_train must print strata's losses (check/losses.txt) and write strata's state after those
# steps (check/expected_weights.bin) byte for byte; it must link no strata library; and it must
# name what is wrong with labels out of range or of the wrong dtype (a GPT's: token ids out of range too).
if(NOT DEFINED OUT)
  message(FATAL_ERROR "check_train.cmake: -DOUT= is required")
endif()
set(run ${OUT}/build/model_train)
file(STRINGS ${OUT}/check/losses.txt lines)
list(LENGTH lines steps)

file(REMOVE ${OUT}/trained.bin)
execute_process(COMMAND ${run} ${OUT}/weights.bin ${OUT}/check/input.npy ${OUT}/check/labels.npy ${steps}
                        ${OUT}/trained.bin RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "model_train failed (${rc}): ${err}")
endif()
file(READ ${OUT}/check/losses.txt expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "model_train printed\n${out}where strata's losses are\n${expected}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/trained.bin ${OUT}/check/expected_weights.bin
                RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "the state model_train wrote (${OUT}/trained.bin) is not bitwise strata's after ${steps} steps "
                      "(${OUT}/check/expected_weights.bin)")
endif()
# The state it wrote is read back: one more step from it continues where strata's would.
execute_process(COMMAND ${run} ${OUT}/trained.bin ${OUT}/check/input.npy ${OUT}/check/labels.npy 1
                        ${OUT}/trained_more.bin RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "model_train from its own state failed (${rc}): ${err}")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/links_no_strata.cmake)
expect_links_no_strata(${run})

function(expect_refusal input labels pattern)
  execute_process(COMMAND ${run} ${OUT}/weights.bin ${input} ${labels} 1 ${OUT}/refused.bin
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "model_train with ${input} and ${labels}: status ${rc}, message \"${err}\" lacks \"${pattern}\"")
  endif()
endfunction()
file(READ ${OUT}/model.h header)
if(header MATCHES "kInputLimit = ([0-9]+)")
  # A GPT: token ids in, the next ids as labels ([B, T]). The last label of labels_out_of_range.npy
  # is one past the vocabulary; as the input, the same ids are refused as tokens.
  set(vocab ${CMAKE_MATCH_1})
  string(REGEX MATCH "kLabelSizes\\[2\\] = \\{([0-9]+), ([0-9]+)\\}" sizes "${header}")
  math(EXPR last "${CMAKE_MATCH_1} * ${CMAKE_MATCH_2} - 1")
  expect_refusal(${OUT}/check/input.npy ${OUT}/check/labels_out_of_range.npy
                 "labels_out_of_range.npy: label ${last} is ${vocab}, out of range \\[0, ${vocab}\\)")
  expect_refusal(${OUT}/check/labels_out_of_range.npy ${OUT}/check/labels.npy
                 "labels_out_of_range.npy: token ${last} is ${vocab}, out of range \\[0, ${vocab}\\)")
else()
  expect_refusal(${OUT}/check/input.npy ${OUT}/check/input.npy "input.npy: dtype '<f4', but the model takes int64")
  expect_refusal(${OUT}/check/input.npy ${OUT}/check/labels_out_of_range.npy
                 "labels_out_of_range.npy: label 1 is 10, out of range \\[0, 10\\)")
endif()
