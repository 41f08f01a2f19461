#include "trace_summary.h"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "strata/ops/table/op_id.h"

namespace strata::bench {

using json = nlohmann::json;

json summarize_trace(const std::vector<ops::TraceEvent>& events) {
  std::map<std::string_view, std::pair<int64_t, double>> by;
  double total = 0;
  for (const auto& e : events) {
    auto& [n, us] = by[ops::op_name(e.op)];
    ++n;
    us += e.host_us;
    total += e.host_us;
  }
  std::vector<std::pair<std::string_view, std::pair<int64_t, double>>> v(by.begin(), by.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  json ops = json::array();
  for (const auto& [name, cu] : v)
    ops.push_back({{"op", std::string(name)}, {"count", cu.first}, {"total_us", cu.second},
                   {"mean_us", cu.second / static_cast<double>(cu.first)}});
  return {{"ops", events.size()}, {"backend_host_us", total}, {"by_op", ops}};
}

}  // namespace strata::bench
