#include "strata/dist/buckets.h"

#include "strata/core/error.h"

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

std::vector<BucketLayout> lay_out_buckets(const std::vector<size_t>& bytes, size_t cap_bytes, size_t alignment) {
  STRATA_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "lay_out_buckets: alignment ", alignment,
               " is not a positive power of two");
  auto round_up = [&](size_t v) { return (v + alignment - 1) / alignment * alignment; };
  std::vector<BucketLayout> out;
  for (auto& ids : plan_buckets(bytes, cap_bytes)) {
    BucketLayout b;
    for (size_t i : ids) {
      b.offsets.push_back(round_up(b.bytes));
      b.bytes = b.offsets.back() + bytes[i];
    }
    b.bytes = round_up(b.bytes);
    b.params = std::move(ids);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace strata::dist
