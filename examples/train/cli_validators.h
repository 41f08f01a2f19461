#pragma once
// Number checks of the trainers' command lines (strata_train, strata_gpt). CLI::Range lets NaN
// through (every comparison with it is false) and CLI11 reads "-1" into an unsigned option as
// 2^64-1: these check the text before CLI11 converts it. CLI11 prefixes the message with the
// option's name.
#include <CLI/CLI.hpp>

namespace strata::train {

// A finite number in [lo, hi] ((lo, hi] when lo_open).
CLI::Validator finite_in(double lo, double hi, bool lo_open = false);
// An integer in [0, 2^64 - 1], in digits.
CLI::Validator unsigned_integer();

}  // namespace strata::train
