# strata_infer on a PNG of an IDX item gives what it gives on the item itself: the same
# class and probabilities (the pixels are the same, so is everything after decoding).
#   cmake -DINFER=... -DCHECKPOINT=... -DIDX_DIR=... -DPNG=... -P infer_png_same_as_idx.cmake
foreach(v INFER CHECKPOINT IDX_DIR PNG)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "infer_png_same_as_idx: -D${v}= is required")
  endif()
endforeach()
execute_process(COMMAND ${INFER} --checkpoint ${CHECKPOINT} --idx ${IDX_DIR} --index 0 --repeat 1 --warmup 0
                RESULT_VARIABLE rc_idx OUTPUT_VARIABLE out_idx ERROR_VARIABLE err_idx)
execute_process(COMMAND ${INFER} --checkpoint ${CHECKPOINT} --image ${PNG} --repeat 1 --warmup 0
                RESULT_VARIABLE rc_png OUTPUT_VARIABLE out_png ERROR_VARIABLE err_png)
if(NOT rc_idx EQUAL 0 OR NOT rc_png EQUAL 0)
  message(FATAL_ERROR "strata_infer failed: --idx rc ${rc_idx}: ${out_idx}${err_idx}\n"
                      "--image rc ${rc_png}: ${out_png}${err_png}")
endif()
string(REGEX MATCH "input: [^\n]*" in_png "${out_png}")
if(NOT in_png MATCHES "\\[1,28,28\\] -> \\[1,28,28\\]")
  message(FATAL_ERROR "the PNG was not read as one 28x28 grey channel: ${in_png}")
endif()
# The class line, without the " | correct/wrong" verdict only the IDX input has a label for.
string(REGEX MATCH "class: [^|\n]*\\| next:[^|\n]*" class_idx "${out_idx}")
string(REGEX MATCH "class: [^|\n]*\\| next:[^|\n]*" class_png "${out_png}")
string(STRIP "${class_idx}" class_idx)
string(STRIP "${class_png}" class_png)
if(class_idx STREQUAL "" OR NOT class_idx STREQUAL class_png)
  message(FATAL_ERROR "different answers:\n--idx:   ${class_idx}\n--image: ${class_png}")
endif()
message(STATUS "same answer for the PNG and the IDX item: ${class_png}")
