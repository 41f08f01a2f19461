#pragma once
// What a synchronised batch norm (op_args.h: BatchNormFwdArgs::sync) asks of the group of
// replicas that run the same op, each on its own rows of one batch (data-parallel ranks):
// per-channel sums replaced by their sums over the replicas. dist::ProcessGroup is one
// (NCCL); the tests use in-process worlds. The op layer knows nothing of processes.
#include <cstddef>

#include "strata/core/dtype.h"

namespace strata::ops {

class ChannelSumReducer {
 public:
  virtual ~ChannelSumReducer() = default;
  // Replicas in the group. A group of one leaves batch norm plain (active_sync).
  virtual int world() const = 0;
  // The `count` values of dtype `dt` at `data` replaced in place by their sum over the
  // replicas, every replica ending with the same values. Every replica makes the same calls
  // in the same order with the same counts. `data` is on the op's device (host memory for a
  // CPU backend, which reads the sums when this returns; device memory for the cuda backend,
  // which calls this from the host while its stream is still computing them: the reduction
  // is ordered after the stream's work so far and the stream's later work after it, without
  // blocking the host, so that a CUDA graph can capture it).
  virtual void all_reduce_sum(void* data, size_t count, DType dt) = 0;
};

// The reducer a batch norm synchronises over: none for a group of one replica, where the
// synchronised batch norm is the plain one bit for bit (PyTorch's SyncBatchNorm on one
// process runs BatchNorm).
inline ChannelSumReducer* active_sync(ChannelSumReducer* r) { return r != nullptr && r->world() > 1 ? r : nullptr; }

}  // namespace strata::ops
