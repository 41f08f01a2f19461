#pragma once
// A group of processes, one per GPU, joined by an NCCL communicator (NCCL is the only
// transport: strata speaks no protocol of its own). Collectives run on a stream of
// their own, ordered after the cuda backend's stream by events; every wait for them
// is bounded: when a peer dies or hangs, NCCL's asynchronous error or the timeout
// ends the wait, the communicator is aborted (ncclCommAbort) and a strata::Error says
// which collective and why. So a rank never hangs on a dead peer.
//
// The gradient all-reduces (begin/end) do not block the host: the backend's stream
// waits for them on the device, and a watchdog thread polls each one's completion and
// NCCL's asynchronous error against the timeout (as PyTorch's ProcessGroupNCCL does).
// On a failure it aborts the communicator, which ends this rank's pending NCCL kernels,
// and the next collective call throws; if the main thread stays blocked 10 s after
// that, the watchdog ends the process (exit status 1) with the message on stderr.
//
// Bootstrap (dist/bootstrap.h): rank 0 creates NCCL's unique id and the other ranks
// receive it through `id_file` when one is given (rank 0 writes it under a temporary
// name and renames it; the others wait for the file), else, in a job started by
// mpirun and a build with MPI, by MPI_Bcast. strata_train --nproc points every rank
// at a file in a private folder (dist/launcher.h); a job started by torchrun sets
// STRATA_DIST_ID_FILE to a path all ranks reach (a shared filesystem across
// machines); one started by mpirun needs nothing more when strata has MPI.
//
// Public header: no CUDA or NCCL header is needed to use it.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/dist/grad_buckets.h"
#include "strata/dist/rank_env.h"
#include "strata/ops/table/channel_sum.h"

namespace strata::dist {

struct ProcessGroupOptions {
  // Where rank 0 leaves the unique id (see above). Empty in a job of several ranks: MPI
  // under mpirun in a build with MPI, else an error.
  std::string id_file;
  double timeout_seconds = 300;  // bound on joining and on every collective
  // The collectives' stream at the device's highest priority: the block scheduler then starts
  // an all-reduce's blocks ahead of the compute stream's waiting ones, instead of when the
  // backward's kernel in flight leaves SMs free.
  bool high_priority_stream = false;
};

// One line of a step's timeline (ProcessGroup::timeline_take): a mark on the backend's stream
// (ready = start = end), or a collective: its inputs ready on the backend's stream, its start and
// end on the collectives' stream; milliseconds of device time from timeline_start().
struct TimelineEntry {
  std::string what;
  double ready_ms = 0, start_ms = 0, end_ms = 0;
  size_t bytes = 0;
};

class ProcessGroup final : public GradientReducer, public ops::ChannelSumReducer {
 public:
  // Joins the group (collective: every rank must construct one). Needs the cuda
  // backend's device (CUDA_VISIBLE_DEVICES already narrowed to this rank's GPU).
  ProcessGroup(const RankInfo& info, const ProcessGroupOptions& o);
  ~ProcessGroup() override;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return info_.rank; }
  int world() const override { return info_.world; }  // both interfaces
  const RankInfo& info() const { return info_; }
  double timeout_seconds() const { return o_.timeout_seconds; }

  // Rank `root`'s values into every rank's tensors (CUDA tensors, dense), in place;
  // returns once done.
  void broadcast(const std::vector<Tensor>& tensors, int root = 0);
  // The sum over ranks of each value (metrics: counts, loss sums), in f64.
  std::vector<double> all_reduce_sum(const std::vector<double>& values);
  // Every rank reaches this point before any leaves it.
  void barrier();
  // Synchronised batch norm's sums (ops::ChannelSumReducer; `data` device memory): one
  // ncclAllReduce(ncclSum) on the collective stream, ordered after the backend's work so far
  // and before its later work by events, the host not blocked; the watchdog bounds it as it
  // bounds the gradients' (see above).
  void all_reduce_sum(void* data, size_t count, DType dt) override;

  // Gradient averaging (dist/data_parallel.h): `count` elements at `data` (device
  // memory, f32, f64, bf16 or f16) replaced by the mean over ranks. Enqueued on the collective
  // stream; orders itself after the backend's work so far at begin() and the
  // backend's later work after it at end(), which returns at once (see above).
  // begin() throws the watchdog's failure, if any.
  // Inside a CUDA graph capture (graph mode's training step) the same calls are
  // captured: the events fork the collective stream from the capture and join it back,
  // and the watchdog has nothing to poll until the graph is launched; then
  // bound_queued_work() hands it everything the backend's stream has queued (the
  // launched graph, its collectives in it), bounded by the same timeout.
  void begin() override;
  void all_reduce_mean(void* data, size_t count, DType dt) override;
  // Copies `bytes` between device buffers on the collective stream (into the buckets).
  void copy(void* dst, const void* src, size_t bytes) override;
  void end(const char* what) override;
  void bound_queued_work(const char* what);

  // Aborts the communicator: pending and later collectives of this rank fail. Safe
  // to call more than once.
  void abort();

  // A timeline of the collectives, to see how much of an exchange the backward hides (the GPU
  // machines run no Nsight Systems): from timeline_start() (time 0 on the backend's stream)
  // each collective enqueued outside a CUDA graph capture is timed by events (see
  // TimelineEntry), end() marks where the backend's stream reached it ("backward done") and
  // where it may go on ("exchange joined"), and timeline_mark() adds marks of the caller's.
  // timeline_take() waits for them, returns the entries in order and turns the timeline off.
  // A captured step records nothing (its calls run at capture, not at launch): time direct
  // or static mode.
  void timeline_start();
  void timeline_mark(const std::string& what);
  std::vector<TimelineEntry> timeline_take();

 private:
  struct Impl;
  // ncclAllReduce in place on the collective stream (`op`: an ncclRedOp_t), its result settled.
  void enqueue_all_reduce(void* data, size_t count, DType dt, int op);
  bool capturing() const;           // the backend's stream is being captured
  std::chrono::steady_clock::duration timeout() const {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(o_.timeout_seconds));
  }
  // An event after `stream`'s work so far, polled by the watchdog; `join`: the backend's
  // stream waits for it.
  void watch_after(void* stream, bool join, const char* what);
  void wait(const char* what);      // host wait, bounded
  void end_sync(const char* what);  // end() with a bounded host wait (broadcast, sums)
  void watch();                     // the watchdog thread
  void check_failure();             // throws the watchdog's failure
  void settle(int nccl_result, const char* call);
  RankInfo info_;
  ProcessGroupOptions o_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::dist
