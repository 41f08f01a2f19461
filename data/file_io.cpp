#include "strata/data/file_io.h"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "strata/core/error.h"

namespace strata::data {

namespace fs = std::filesystem;

bool is_gzip(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

std::vector<uint8_t> gunzip(const std::vector<uint8_t>& bytes, const std::string& what, uint64_t limit) {
  const uint64_t cap = limit == kNoSizeLimit ? limit : limit + 1;
  STRATA_CHECK(is_gzip(bytes), what, ": not a gzip stream (bad magic)");
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header and trailer (CRC and length are checked).
  STRATA_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, what, ": zlib inflateInit2 failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, &inflateEnd);

  std::vector<uint8_t> out;
  // The trailer's ISIZE (length mod 2^32) is only a hint: it is garbage in a truncated
  // file and wrong for concatenated members, so it is used only when plausible (deflate
  // cannot expand more than 1032:1) and capped.
  if (bytes.size() >= 18) {
    const uint8_t* t = bytes.data() + bytes.size() - 4;
    const uint64_t isize = t[0] | (t[1] << 8) | (t[2] << 16) | (uint64_t(t[3]) << 24);
    if (isize <= 1032 * static_cast<uint64_t>(bytes.size()))
      out.reserve(std::min<uint64_t>(std::min<uint64_t>(isize, cap), 1u << 28));
  }
  std::vector<uint8_t> chunk(1 << 18);
  size_t in_pos = 0;
  bool member_done = false;
  while (true) {
    const size_t chunk_in = std::min<size_t>(bytes.size() - in_pos, std::numeric_limits<uInt>::max());
    zs.next_in = const_cast<Bytef*>(bytes.data() + in_pos);
    zs.avail_in = static_cast<uInt>(chunk_in);
    const size_t room = std::min<uint64_t>(chunk.size(), cap - out.size());
    zs.next_out = chunk.data();
    zs.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.insert(out.end(), chunk.data(), chunk.data() + (room - zs.avail_out));
    in_pos += chunk_in - zs.avail_in;
    if (out.size() == cap) return out;  // more than the caller can use: it reports the excess
    if (rc == Z_STREAM_END) {
      member_done = true;
      if (in_pos == bytes.size()) break;
      // Another member follows (or trailing garbage, which the next header check rejects).
      STRATA_CHECK(inflateReset(&zs) == Z_OK, what, ": zlib inflateReset failed");
      member_done = false;
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR || rc == Z_STREAM_ERROR)
      STRATA_FAIL(what, ": corrupt gzip stream (zlib: ", zs.msg ? zs.msg : zError(rc), ")");
    // Z_OK or Z_BUF_ERROR: more is possible only while input remains or output was full.
    if (in_pos == bytes.size() && zs.avail_out != 0) break;
  }
  STRATA_CHECK(member_done, what, ": truncated gzip stream (ended after ", bytes.size(), " compressed bytes, ",
               out.size(), " bytes inflated)");
  return out;
}

fs::path first_existing(const std::vector<fs::path>& candidates, const std::string& what) {
  std::string tried;
  for (const auto& p : candidates) {
    std::error_code ec;
    if (fs::exists(p, ec)) return p;
    tried += (tried.empty() ? "'" : ", '") + p.string() + "'";
  }
  STRATA_FAIL("cannot find ", what, ": none of ", tried, " exists");
}

}  // namespace strata::data
