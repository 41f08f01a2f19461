#include "strata/ops/dispatch.h"

namespace strata::ops {

DispatchMode parse_dispatch_mode(const std::string& s) {
  if (s == "virtual") return DispatchMode::virtual_call;
  if (s == "static") return DispatchMode::static_call;
  if (s == "direct") return DispatchMode::direct;
  if (s == "graph") return DispatchMode::graph;
  STRATA_FAIL("dispatch mode '", s, "' is unknown (expected virtual, static, direct or graph)");
}

std::string_view dispatch_mode_name(DispatchMode m) {
  switch (m) {
    case DispatchMode::virtual_call: return "virtual";
    case DispatchMode::static_call: return "static";
    case DispatchMode::direct: return "direct";
    case DispatchMode::graph: return "graph";
  }
  return "?";
}

}  // namespace strata::ops
