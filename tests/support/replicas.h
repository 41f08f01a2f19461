#pragma once
// In-process stand-ins for a group of data-parallel replicas (ops::ChannelSumReducer), so
// that synchronised batch norm runs without NCCL:
//   - ThreadWorld: n ranks, each a thread running its own half (or share) of a batch; each
//     all-reduce is a barrier and a sum in rank order (in double), so every rank gets the
//     same values, deterministically. A rank that fails releases the others (they throw)
//     instead of leaving them at a barrier.
//   - IdenticalReplicas: `world` ranks that hold the same rows: every sum times `world`,
//     through a backend's scale op on its own device and stream (a cuda backend's sums stay
//     on the GPU, and a CUDA graph captures the scaling).
//   - CountingGroup: sums left as they are, calls counted: exact for a group of one, and for
//     larger groups where a test expects no call at all.
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/backends/api/backend.h"
#include "strata/core/error.h"
#include "strata/ops/table/channel_sum.h"

namespace strata::testing {

class ThreadWorld {
 public:
  // One rank's endpoint: its reducer.
  class Rank final : public ops::ChannelSumReducer {
   public:
    Rank(ThreadWorld& w, int r) : w_(&w), r_(r) {}
    int world() const override { return w_->n_; }
    int rank() const { return r_; }
    void all_reduce_sum(void* data, size_t count, DType dt) override { w_->reduce(r_, data, count, dt, 1.0); }
    // The mean over the ranks instead (gradients' averaging).
    void all_reduce_mean(void* data, size_t count, DType dt) { w_->reduce(r_, data, count, dt, 1.0 / w_->n_); }
    int calls() const { return calls_; }

   private:
    friend class ThreadWorld;
    ThreadWorld* w_;
    int r_;
    int calls_ = 0;
  };

  explicit ThreadWorld(int n) : n_(n), slots_(static_cast<size_t>(n)) {
    for (int r = 0; r < n; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
  }
  int size() const { return n_; }
  Rank& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }

  // fn(rank) on one thread per rank; rethrows the first rank's failure.
  void run(const std::function<void(int)>& fn) {
    failed_ = false;
    arrived_ = 0;
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n_));
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; ++r)
      threads.emplace_back([&, r] {
        try {
          fn(r);
        } catch (...) {
          errors[static_cast<size_t>(r)] = std::current_exception();
          std::lock_guard lk(mu_);
          failed_ = true;
          cv_.notify_all();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

 private:
  struct Slot {
    const void* data = nullptr;
    size_t count = 0;
    DType dt = DType::f64;
  };

  void barrier() {
    std::unique_lock lk(mu_);
    const uint64_t gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lk, [&] { return generation_ != gen || failed_; });
    STRATA_CHECK(generation_ != gen, "ThreadWorld: another rank failed");
  }

  template <class T>
  static void accumulate(std::vector<double>& acc, const void* data) {
    const T* p = static_cast<const T*>(data);
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += static_cast<double>(p[i]);
  }
  template <class T>
  static void store(void* data, const std::vector<double>& acc, double scale) {
    T* p = static_cast<T*>(data);
    for (size_t i = 0; i < acc.size(); ++i) p[i] = static_cast<T>(acc[i] * scale);
  }

  void reduce(int r, void* data, size_t count, DType dt, double scale) {
    STRATA_CHECK(dt == DType::f32 || dt == DType::f64, "ThreadWorld: sums f32 or f64, got ", dtype_name(dt));
    ++ranks_[static_cast<size_t>(r)]->calls_;
    slots_[static_cast<size_t>(r)] = {data, count, dt};
    barrier();
    for (const Slot& s : slots_)
      STRATA_CHECK(s.count == count && s.dt == dt, "ThreadWorld: rank ", r, " reduces ", count, " ", dtype_name(dt),
                   " while another rank reduces ", s.count, " ", dtype_name(s.dt), " (the ranks' calls disagree)");
    std::vector<double> acc(count, 0.0);
    for (const Slot& s : slots_) dt == DType::f32 ? accumulate<float>(acc, s.data) : accumulate<double>(acc, s.data);
    barrier();  // every rank has read every slot before any writes its own
    dt == DType::f32 ? store<float>(data, acc, scale) : store<double>(data, acc, scale);
  }

  int n_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool failed_ = false;
};

class IdenticalReplicas final : public ops::ChannelSumReducer {
 public:
  IdenticalReplicas(backends::Backend& be, int world) : be_(be), world_(world) {}
  int world() const override { return world_; }
  void all_reduce_sum(void* data, size_t count, DType dt) override {
    ++calls;
    ops::TensorView v;
    v.data = data;
    v.sizes = Shape{static_cast<int64_t>(count)};
    v.strides = Shape{1};
    v.dtype = dt;
    v.device = Device{be_.device_type(), 0};
    v.defined = true;
    be_.scale(ops::ScaleArgs{v, v, static_cast<double>(world_)});
  }
  int calls = 0;

 private:
  backends::Backend& be_;
  int world_;
};

class CountingGroup final : public ops::ChannelSumReducer {
 public:
  explicit CountingGroup(int world) : world_(world) {}
  int world() const override { return world_; }
  void all_reduce_sum(void*, size_t, DType) override { ++calls; }
  int calls = 0;

 private:
  int world_;
};

}  // namespace strata::testing
