#include "strata/dist/buckets.h"

namespace strata::dist {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<size_t>& bytes, size_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> cur;
  size_t cur_bytes = 0;
  for (size_t k = bytes.size(); k-- > 0;) {
    cur.push_back(k);
    cur_bytes += bytes[k];
    if (cur_bytes >= cap_bytes) {
      buckets.push_back(std::move(cur));
      cur.clear();
      cur_bytes = 0;
    }
  }
  if (!cur.empty()) buckets.push_back(std::move(cur));
  return buckets;
}

}  // namespace strata::dist
