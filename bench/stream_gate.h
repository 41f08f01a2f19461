// Holding a CUDA stream while the host enqueues work behind it, to time the two apart: the
// enqueue by steady_clock, the work by CUDA events that then see it back to back, free of the
// gaps a host-bound run leaves between kernels (the study's per-op costs, GPT decoding's host
// and device time per token).
#pragma once

#include <atomic>

namespace strata::bench {

class StreamGate {
 public:
  explicit StreamGate(void* stream) : stream_(stream) {}
  // Enqueues a host function that holds the stream until open() (or a second has passed: work
  // that waits for its own stream, a device-to-host read, cannot deadlock; counted in timeouts()).
  void hold();
  void open() { state_.open.store(true, std::memory_order_release); }
  int timeouts() const { return state_.timeouts.load(); }

  struct State {
    std::atomic<bool> open{false};
    std::atomic<int> timeouts{0};
  };

 private:
  void* stream_;
  State state_;
};

}  // namespace strata::bench
