#pragma once
// cuDNN and cuBLAS are opened at run time, when a device is initialised (lazy_libraries.cpp says why).
// Internal to backends/cuda.
#include <string_view>

namespace strata::backends::cuda {

// Opens both libraries now; a strata::Error names the one that cannot be loaded and why.
void load_libraries();

}  // namespace strata::backends::cuda
