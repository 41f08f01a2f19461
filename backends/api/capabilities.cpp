#include "strata/backends/api/capabilities.h"

namespace strata::backends {

std::string DTypeSet::str() const {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto d = static_cast<DType>(i);
    if (!contains(d)) continue;
    if (!s.empty()) s += ", ";
    s += dtype_name(d);
  }
  return s.empty() ? "none" : s;
}

const char* layout_name(ViewLayout l) {
  switch (l) {
    case ViewLayout::nchw: return "nchw";
    case ViewLayout::nhwc: return "nhwc";
    case ViewLayout::strided: return "strided";
  }
  return "?";
}

std::string Capabilities::table() const {
  std::string out;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    std::string line(ops::op_name(op));
    line.resize(22, ' ');
    line += ops::op_kind_name(ops::op_kind(op));
    line.resize(35, ' ');
    line += dtypes(op).str();
    if (ops::is_spatial(ops::op_kind(op))) {
      line.resize(70, ' ');
      for (ViewLayout l : {ViewLayout::nchw, ViewLayout::nhwc, ViewLayout::strided})
        if (accepts(op, l)) (line += layout_name(l)) += ' ';
      line.pop_back();
    }
    out += line + '\n';
  }
  return out;
}

}  // namespace strata::backends
