#pragma once
// How a 4-D tensor's elements lie in memory: NCHW (contiguous) or NHWC (channels_last), as
// PyTorch's torch.memory_format. Its own header so that the backends' contract can name it.
#include <cstdint>

namespace strata {

enum class MemoryFormat : uint8_t { contiguous, channels_last };

}  // namespace strata
