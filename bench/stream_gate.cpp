#include "stream_gate.h"

#include <cuda_runtime.h>

#include <chrono>
#include <thread>

#include "resnet50_support.h"

namespace strata::bench {

namespace {

// Runs on the driver's callback thread.
void CUDART_CB hold_stream(void* p) {
  auto* g = static_cast<StreamGate::State*>(p);
  const auto t0 = std::chrono::steady_clock::now();
  while (!g->open.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(1)) {
      g->timeouts.fetch_add(1);
      return;
    }
    std::this_thread::yield();
  }
}

}  // namespace

void StreamGate::hold() {
  state_.open.store(false);
  cuda_check(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream_), hold_stream, &state_), "cudaLaunchHostFunc");
}

}  // namespace strata::bench
