#pragma once
// The consumer's own data/loader.h (see core/tensor.h).
namespace consumer {
inline int batches_in(int items, int batch) { return (items + batch - 1) / batch; }
}  // namespace consumer
