#include "strata/backends/cuda/call_observer.h"

#include <cudnn.h>

namespace strata::backends::cuda {

namespace {
constinit thread_local CallObserver* t_observer = nullptr;
constinit thread_local bool t_copies = false;
}

CallObserver* call_observer() { return t_observer; }

ScopedCallObserver::ScopedCallObserver(CallObserver* o) : saved_(t_observer) { t_observer = o; }
ScopedCallObserver::~ScopedCallObserver() { t_observer = saved_; }

bool copies_observed() { return t_copies; }
ScopedCopyObservation::ScopedCopyObservation() : saved_(t_copies) { t_copies = true; }
ScopedCopyObservation::~ScopedCopyObservation() { t_copies = saved_; }

int64_t cudnn_runtime_version() { return static_cast<int64_t>(cudnnGetVersion()); }

}  // namespace strata::backends::cuda
