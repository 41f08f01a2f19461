#pragma once
// The parts of a generated project that no emitter changes: the weights file's format and
// reader, and the .npy reading and writing of the command-line programs.
#include <cstdint>
#include <string>

namespace strata::codegen {

// weights.h and weights.cpp: the weights file's reader (a checked header, then the bytes).
std::string weights_h();
std::string weights_cpp();
// The .npy helpers a program's main.cpp opens with (read_npy<T>, write_npy, shape_str; checked
// shapes and dtypes, named errors), after the includes they need and "model.h".
std::string npy_helpers();
// check_range(ids, limit, path, what), after npy_helpers(): the ids a program reads (labels, token
// ids) in [0, limit), else an error naming the file, the position and the value.
std::string range_check();

// main.cpp of a training step: model_train WEIGHTS INPUT.npy LABELS.npy STEPS OUT_WEIGHTS, the
// labels checked and named; with graph_switch also [--no-graph] (the Model takes (path, graph));
// token_ids: the input is int64 token ids, checked against the model's kInputLimit (a GPT's).
std::string train_main_cpp(bool graph_switch, bool token_ids = false);

// The weights file's header: magic, payload bytes, FNV-1a checksum of the payload.
inline constexpr char kWeightsMagic[8] = {'D', 'N', 'N', 'L', 'W', 'T', 'S', '1'};
uint64_t fnv1a(const void* data, int64_t bytes);

}  // namespace strata::codegen
