#include "strata/backends/onednn/call_observer.h"

#include <dnnl.hpp>

namespace strata::backends::onednn {

namespace {
constinit thread_local CallObserver* t_observer = nullptr;
}

CallObserver* call_observer() { return t_observer; }

ScopedCallObserver::ScopedCallObserver(CallObserver* o) : saved_(t_observer) { t_observer = o; }
ScopedCallObserver::~ScopedCallObserver() { t_observer = saved_; }

std::string library_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace strata::backends::onednn
