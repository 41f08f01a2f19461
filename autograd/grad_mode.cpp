#include "strata/autograd/grad_mode.h"

namespace strata::autograd {
namespace {
thread_local bool g_enabled = true;
}
bool GradMode::enabled() { return g_enabled; }
void GradMode::set_enabled(bool on) { g_enabled = on; }
}  // namespace strata::autograd
