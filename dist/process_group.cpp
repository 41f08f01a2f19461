#include "strata/dist/process_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/core/error.h"
#include "strata/dist/bootstrap.h"

namespace strata::dist {

namespace {

using Clock = std::chrono::steady_clock;

#define STRATA_DIST_CUDA(call)                                                                 \
  do {                                                                                         \
    const cudaError_t e_ = (call);                                                             \
    STRATA_CHECK(e_ == cudaSuccess, "dist: ", #call, " failed: ", cudaGetErrorString(e_));     \
  } while (0)

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
  }
  STRATA_FAIL("dist: dtype ", dtype_name(dt), " has no NCCL type");
}

}  // namespace

struct ProcessGroup::Impl {
  // Guards the communicator (NCCL calls of the main thread against the watchdog's abort)
  // and the fields after it.
  std::mutex mu;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;     // the collectives'
  cudaStream_t compute = nullptr;    // the cuda backend's
  cudaEvent_t ready = nullptr, done = nullptr;
  double* scratch = nullptr;         // all_reduce_sum's values on the device
  double* host = nullptr;            // and on the host, pinned: a copy from pageable memory would block unbounded
  size_t scratch_count = 0;
  bool aborted = false;

  // Gradient all-reduces in flight: the backend's stream waits for each on the device
  // (no host block); the watchdog thread bounds each one's time.
  struct Pending {
    cudaEvent_t done;
    Clock::time_point deadline;
    std::string what;
  };
  std::deque<Pending> pending;
  std::vector<cudaEvent_t> spare;  // completed events, reused

  // The timeline (timeline_start): timing events, destroyed by timeline_take.
  struct Timed {
    std::string what;
    cudaEvent_t ready = nullptr, start = nullptr, end = nullptr;  // a mark: ready only
    size_t bytes = 0;
  };
  bool timeline = false;
  cudaEvent_t origin = nullptr;
  cudaEvent_t next_ready = nullptr;  // begin()'s, taken by the collective after it
  std::vector<Timed> timed;
  void drop_timeline() {
    for (const Timed& t : timed)
      for (cudaEvent_t e : {t.ready, t.start, t.end})
        if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : {origin, next_ready})
      if (e) cudaEventDestroy(e);
    timed.clear();
    origin = next_ready = nullptr;
    timeline = false;
  }
  std::string failure;             // the watchdog's verdict, thrown by the main thread
  // Set once the main thread has thrown the verdict (or the group is destroyed); shared
  // with the timer that ends a process whose main thread stays blocked after a failure.
  std::shared_ptr<std::atomic<bool>> failure_seen = std::make_shared<std::atomic<bool>>(false);
  bool stop = false;
  std::condition_variable cv;
  std::thread watchdog;
};

ProcessGroup::ProcessGroup(const RankInfo& info, const ProcessGroupOptions& o)
    : info_(info), o_(o), impl_(std::make_unique<Impl>()) {
  STRATA_CHECK(o_.timeout_seconds > 0, "dist: the timeout must be positive, got ", o_.timeout_seconds, " s");
  choose_id_transport(info_, o_.id_file);  // a job with no way to share the id fails here, before any CUDA work
  auto& cuda = backends::registry().impl<backends::CudaBackend>();
  impl_->compute = static_cast<cudaStream_t>(cuda.stream());
  int least = 0, greatest = 0;
  STRATA_DIST_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  STRATA_DIST_CUDA(cudaStreamCreateWithPriority(&impl_->stream, cudaStreamNonBlocking,
                                                o_.high_priority_stream ? greatest : least));
  STRATA_DIST_CUDA(cudaEventCreateWithFlags(&impl_->ready, cudaEventDisableTiming));
  STRATA_DIST_CUDA(cudaEventCreateWithFlags(&impl_->done, cudaEventDisableTiming));

  ncclUniqueId id;
  if (info_.rank == 0) STRATA_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "dist: ncclGetUniqueId failed");
  share_from_rank0(std::as_writable_bytes(std::span(id.internal)), info_, o_.id_file, o_.timeout_seconds);
  // Non-blocking: joining (and any call) returns at once and is polled, so a peer that
  // never arrives ends in the timeout instead of a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&impl_->comm, info_.world, id, info_.rank, &config);
  STRATA_CHECK(r == ncclSuccess || r == ncclInProgress, "dist: rank ", info_.rank,
               ": ncclCommInitRankConfig failed: ", ncclGetErrorString(r));
  const auto t0 = Clock::now();
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(impl_->comm, &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress || seconds_since(t0) > o_.timeout_seconds) {
      abort();
      STRATA_FAIL("dist: rank ", info_.rank, " of ", info_.world, ": joining the NCCL communicator ",
                  state == ncclInProgress ? "did not finish within " + std::to_string(o_.timeout_seconds) + " s"
                                          : std::string("failed: ") + ncclGetErrorString(state),
                  " (a rank did not start or died)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->watchdog = std::thread([this] { watch(); });
}

void ProcessGroup::watch() {
  Impl& m = *impl_;
  std::unique_lock lk(m.mu);
  while (!m.stop) {
    if (m.pending.empty() || m.aborted) {
      m.cv.wait_for(lk, std::chrono::milliseconds(50));
      continue;
    }
    Impl::Pending& p = m.pending.front();
    const cudaError_t q = cudaEventQuery(p.done);
    if (q == cudaSuccess) {
      m.spare.push_back(p.done);
      m.pending.pop_front();
      // The next one's bound runs from its enqueue or from now, whichever is later: a host
      // far ahead of the device (graph mode's single launch per step) queues work whose
      // wait starts only when the work before it is done.
      if (!m.pending.empty())
        m.pending.front().deadline = std::max(m.pending.front().deadline, Clock::now() + timeout());
      m.cv.notify_all();
      continue;
    }
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(m.comm, &state);
    const bool nccl_error = state != ncclSuccess && state != ncclInProgress;
    if (q != cudaErrorNotReady || nccl_error || Clock::now() > p.deadline) {
      m.failure = "dist: rank " + std::to_string(info_.rank) + " of " + std::to_string(info_.world) + ": " + p.what +
                  (q != cudaErrorNotReady ? std::string(" failed in CUDA: ") + cudaGetErrorString(q)
                   : nccl_error           ? std::string(" failed in NCCL: ") + ncclGetErrorString(state)
                                          : " did not finish within " + std::to_string(o_.timeout_seconds) + " s") +
                  ": another rank died or hangs; the NCCL communicator was aborted";
      m.aborted = true;
      m.pending.clear();
      m.cv.notify_all();
      // The main thread reports the failure at its next collective (or graph launch). Should
      // it stay blocked anyway (a device wait that the abort did not release; a graph's
      // NCCL kernels that keep the launch queue full), or the abort itself not return, the
      // process must not hang: a timer of its own ends it.
      std::thread([seen = m.failure_seen, msg = m.failure] {
        std::this_thread::sleep_for(std::chrono::seconds(10));
        if (seen->load()) return;
        std::fprintf(stderr, "%s; the process stops here (its main thread stayed blocked)\n", msg.c_str());
        std::fflush(stderr);
        std::_Exit(1);
      }).detach();
      // Ends this rank's pending NCCL kernels, so the main thread's waits return. Outside
      // the lock: the main thread may need it to reach the failure.
      lk.unlock();
      ncclCommAbort(m.comm);
      lk.lock();
      continue;
    }
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    lk.lock();
  }
}

void ProcessGroup::check_failure() {
  std::lock_guard lk(impl_->mu);
  if (impl_->failure.empty()) return;
  impl_->failure_seen->store(true);
  STRATA_FAIL(impl_->failure);
}

ProcessGroup::~ProcessGroup() {
  impl_->failure_seen->store(true);
  if (impl_->watchdog.joinable()) {
    {
      std::lock_guard lk(impl_->mu);
      impl_->stop = true;
    }
    impl_->cv.notify_all();
    impl_->watchdog.join();
  }
  for (cudaEvent_t e : impl_->spare) cudaEventDestroy(e);
  if (impl_->comm && !impl_->aborted) {
    // A communicator whose peers are gone cannot be finalised; abort is always safe.
    ncclCommAbort(impl_->comm);
  }
  if (impl_->scratch) cudaFree(impl_->scratch);
  if (impl_->host) cudaFreeHost(impl_->host);
  impl_->drop_timeline();
  if (impl_->ready) cudaEventDestroy(impl_->ready);
  if (impl_->done) cudaEventDestroy(impl_->done);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

void ProcessGroup::abort() {
  std::lock_guard lk(impl_->mu);
  if (impl_->comm && !impl_->aborted) {
    impl_->aborted = true;
    ncclCommAbort(impl_->comm);
  }
}

namespace {

cudaEvent_t timing_event(cudaStream_t stream) {
  cudaEvent_t e = nullptr;
  STRATA_DIST_CUDA(cudaEventCreate(&e));
  STRATA_DIST_CUDA(cudaEventRecord(e, stream));
  return e;
}

}  // namespace

void ProcessGroup::timeline_start() {
  STRATA_CHECK(!capturing(), "dist: a timeline is taken outside a CUDA graph capture (direct or static mode)");
  impl_->drop_timeline();  // an earlier one not taken
  impl_->timeline = true;
  impl_->origin = timing_event(impl_->compute);
}

void ProcessGroup::timeline_mark(const std::string& what) {
  if (!impl_->timeline || capturing()) return;
  impl_->timed.push_back({what, timing_event(impl_->compute)});
}

std::vector<TimelineEntry> ProcessGroup::timeline_take() {
  Impl& m = *impl_;
  std::vector<TimelineEntry> out;
  if (!m.origin) {
    m.drop_timeline();
    return out;
  }
  const auto ms = [&](cudaEvent_t e) {
    float t = 0;
    STRATA_DIST_CUDA(cudaEventSynchronize(e));
    STRATA_DIST_CUDA(cudaEventElapsedTime(&t, m.origin, e));
    return static_cast<double>(t);
  };
  for (const Impl::Timed& t : m.timed) {
    TimelineEntry e{t.what, 0, 0, 0, t.bytes};
    e.start_ms = ms(t.start ? t.start : t.ready);
    e.ready_ms = t.ready ? ms(t.ready) : e.start_ms;
    e.end_ms = t.end ? ms(t.end) : e.start_ms;
    out.push_back(std::move(e));
  }
  m.drop_timeline();
  return out;
}

void ProcessGroup::begin() {
  check_failure();
  STRATA_CHECK(!impl_->aborted, "dist: rank ", info_.rank, ": the communicator was aborted after an earlier failure");
  STRATA_DIST_CUDA(cudaEventRecord(impl_->ready, impl_->compute));
  STRATA_DIST_CUDA(cudaStreamWaitEvent(impl_->stream, impl_->ready, 0));
  if (impl_->timeline && !capturing()) {
    if (impl_->next_ready) cudaEventDestroy(impl_->next_ready);  // a begin() no collective followed
    impl_->next_ready = timing_event(impl_->compute);
  }
}

void ProcessGroup::settle(int result, const char* call) {
  // A call on a non-blocking communicator may answer ncclInProgress (connecting to the
  // peers, at the first collectives); no other call may follow until its state settles.
  auto r = static_cast<ncclResult_t>(result);
  const auto t0 = Clock::now();
  while (r == ncclInProgress) {
    {
      std::lock_guard lk(impl_->mu);
      if (impl_->aborted) break;
      ncclCommGetAsyncError(impl_->comm, &r);
    }
    if (r == ncclInProgress && seconds_since(t0) > o_.timeout_seconds) {
      abort();
      STRATA_FAIL("dist: rank ", info_.rank, " of ", info_.world, ": ", call, " did not finish within ",
                  o_.timeout_seconds, " s: another rank died or hangs; the NCCL communicator was aborted");
    }
    if (r == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  check_failure();
  if (r != ncclSuccess) {
    abort();
    STRATA_FAIL("dist: rank ", info_.rank, " of ", info_.world, ": ", call, " failed: ", ncclGetErrorString(r),
                "; the NCCL communicator was aborted");
  }
}

void ProcessGroup::all_reduce_mean(void* data, size_t count, DType dt) {
  STRATA_CHECK(is_floating(dt), "dist: gradients are averaged in f32, f64, bf16 or f16, got ", dtype_name(dt));
  enqueue_all_reduce(data, count, dt, ncclAvg);
}

void ProcessGroup::all_reduce_sum(void* data, size_t count, DType dt) {
  begin();
  enqueue_all_reduce(data, count, dt, ncclSum);
  end("all-reduce of batch norm statistics");
}

void ProcessGroup::enqueue_all_reduce(void* data, size_t count, DType dt, int op) {
  const bool timed = impl_->timeline && !capturing();
  Impl::Timed t{"all-reduce", nullptr, nullptr, nullptr, count * dtype_size(dt)};
  if (timed) {
    std::swap(t.ready, impl_->next_ready);
    t.start = timing_event(impl_->stream);
  }
  ncclResult_t r;
  {
    std::lock_guard lk(impl_->mu);
    STRATA_CHECK(!impl_->aborted, "dist: rank ", info_.rank, ": the communicator was aborted after an earlier failure");
    r = ncclAllReduce(data, data, count, nccl_type(dt), static_cast<ncclRedOp_t>(op), impl_->comm, impl_->stream);
  }
  settle(r, "ncclAllReduce");
  if (timed) {
    t.end = timing_event(impl_->stream);
    impl_->timed.push_back(std::move(t));
  }
}

void ProcessGroup::copy(void* dst, const void* src, size_t bytes) {
  STRATA_DIST_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_->stream));
}

void ProcessGroup::end(const char* what) {
  if (capturing()) {
    // The join a capture needs; an event recorded during capture is no completion to poll
    // (the graph-launch hook bounds each launch instead: bound_queued_work).
    STRATA_DIST_CUDA(cudaEventRecord(impl_->done, impl_->stream));
    STRATA_DIST_CUDA(cudaStreamWaitEvent(impl_->compute, impl_->done, 0));
    return;
  }
  // The backend's next work (the optimizer) waits on the device; the host goes on, as
  // PyTorch's DDP does, and the watchdog bounds the wait.
  timeline_mark("backward done");
  watch_after(impl_->stream, true, what);
  timeline_mark("exchange joined");
}

void ProcessGroup::bound_queued_work(const char* what) {
  check_failure();
  watch_after(impl_->compute, false, what);
}

bool ProcessGroup::capturing() const {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  STRATA_DIST_CUDA(cudaStreamIsCapturing(impl_->compute, &capture));
  return capture != cudaStreamCaptureStatusNone;
}

void ProcessGroup::watch_after(void* stream, bool join, const char* what) {
  Impl& m = *impl_;
  cudaEvent_t ev = nullptr;
  {
    std::lock_guard lk(m.mu);
    if (!m.spare.empty()) {
      ev = m.spare.back();
      m.spare.pop_back();
    }
  }
  // CUDA calls without the lock: with the device stuck (a dead peer) they may block until
  // the launch queue drains, and the watchdog needs the lock to abort and release it.
  if (!ev) STRATA_DIST_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  STRATA_DIST_CUDA(cudaEventRecord(ev, static_cast<cudaStream_t>(stream)));
  if (join) STRATA_DIST_CUDA(cudaStreamWaitEvent(m.compute, ev, 0));
  std::lock_guard lk(m.mu);
  m.pending.push_back({ev, Clock::now() + timeout(), what});
  m.cv.notify_all();
}

void ProcessGroup::end_sync(const char* what) {
  wait(what);
  STRATA_DIST_CUDA(cudaStreamWaitEvent(impl_->compute, impl_->done, 0));
}

void ProcessGroup::wait(const char* what) {
  STRATA_DIST_CUDA(cudaEventRecord(impl_->done, impl_->stream));
  const auto t0 = Clock::now();
  for (int polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(impl_->done);
    if (q == cudaSuccess) return;
    STRATA_CHECK(q == cudaErrorNotReady, "dist: rank ", info_.rank, ": ", what, ": ", cudaGetErrorString(q));
    check_failure();
    ncclResult_t state = ncclSuccess;
    {
      std::lock_guard lk(impl_->mu);
      STRATA_CHECK(!impl_->aborted, "dist: rank ", info_.rank, ": ", what,
                   ": the communicator was aborted after an earlier failure");
      ncclCommGetAsyncError(impl_->comm, &state);
    }
    const double t = seconds_since(t0);
    if ((state != ncclSuccess && state != ncclInProgress) || t > o_.timeout_seconds) {
      abort();
      STRATA_FAIL("dist: rank ", info_.rank, " of ", info_.world, ": ", what, " ",
                  state != ncclSuccess && state != ncclInProgress
                      ? std::string("failed in NCCL: ") + ncclGetErrorString(state)
                      : "did not finish within " + std::to_string(o_.timeout_seconds) + " s",
                  ": another rank died or hangs; the NCCL communicator was aborted");
    }
    // Spin briefly (a step's all-reduce takes milliseconds), then back off.
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 100000 ? 1000 : 50));
  }
}

void ProcessGroup::broadcast(const std::vector<Tensor>& tensors, int root) {
  begin();
  for (const Tensor& t : tensors) {
    STRATA_CHECK(t.device().type == DeviceType::cuda, "dist: broadcast needs CUDA tensors, got one on ",
                 t.device().str());
    STRATA_CHECK(t.is_contiguous() || t.is_channels_last(), "dist: broadcast needs dense tensors, got strides ",
                 t.strides().str());
    ncclResult_t r;
    {
      std::lock_guard lk(impl_->mu);
      r = ncclBroadcast(t.data_ptr(), t.data_ptr(), t.nbytes(), ncclUint8, root, impl_->comm, impl_->stream);
    }
    settle(r, "ncclBroadcast");
  }
  end_sync("broadcast of the parameters and buffers from rank 0");
}

std::vector<double> ProcessGroup::all_reduce_sum(const std::vector<double>& values) {
  if (values.empty()) return {};
  if (impl_->scratch_count < values.size()) {
    if (impl_->scratch) STRATA_DIST_CUDA(cudaFree(impl_->scratch));
    if (impl_->host) STRATA_DIST_CUDA(cudaFreeHost(impl_->host));
    impl_->scratch = impl_->host = nullptr;
    STRATA_DIST_CUDA(cudaMalloc(&impl_->scratch, values.size() * sizeof(double)));
    STRATA_DIST_CUDA(cudaMallocHost(&impl_->host, values.size() * sizeof(double)));
    impl_->scratch_count = values.size();
  }
  std::memcpy(impl_->host, values.data(), values.size() * sizeof(double));
  begin();
  STRATA_DIST_CUDA(cudaMemcpyAsync(impl_->scratch, impl_->host, values.size() * sizeof(double),
                                   cudaMemcpyHostToDevice, impl_->stream));
  enqueue_all_reduce(impl_->scratch, values.size(), DType::f64, ncclSum);
  STRATA_DIST_CUDA(cudaMemcpyAsync(impl_->host, impl_->scratch, values.size() * sizeof(double),
                                   cudaMemcpyDeviceToHost, impl_->stream));
  end_sync("sum of the metrics over ranks");
  return std::vector<double>(impl_->host, impl_->host + values.size());
}

void ProcessGroup::barrier() { all_reduce_sum({0.0}); }

}  // namespace strata::dist
