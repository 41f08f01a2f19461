#include "strata/onnx/external_data.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "strata/core/error.h"
#include "strata/core/file.h"

#if STRATA_ONNX_SHA1
#include <nettle/sha1.h>
#endif

namespace strata::onnx::detail {

namespace fs = std::filesystem;

namespace {

// A byte count written as decimal digits only (no sign, no spaces), as ONNX writes them.
std::optional<uint64_t> byte_count(const std::string& s) {
  uint64_t v = 0;
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

#if STRATA_ONNX_SHA1
std::string sha1_of_file(const fs::path& file) {
  sha1_ctx ctx;
  sha1_init(&ctx);
  std::vector<uint8_t> piece(size_t{16} << 20);
  const uint64_t size = read_file_range(file, 0, {});
  for (uint64_t at = 0; at < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), size - at));
    read_file_range(file, at, std::span<uint8_t>(piece.data(), n));
    sha1_update(&ctx, n, piece.data());
    at += n;
  }
  uint8_t digest[SHA1_DIGEST_SIZE];
  sha1_digest(&ctx, SHA1_DIGEST_SIZE, digest);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : digest) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}
#endif

}  // namespace

fs::path ExternalData::resolve(const std::string& location) {
  STRATA_CHECK(!location.empty(), "external_data has an empty location");
  STRATA_CHECK(location.find('\0') == std::string::npos, "location '", location.c_str(), "...' holds a NUL byte");
  const fs::path loc(location);
  STRATA_CHECK(!loc.has_root_path(), "location '", location, "' is an absolute path (it must be relative to the "
               "model's folder ", quoted(folder_), ")");
  for (const fs::path& part : loc)
    STRATA_CHECK(part != "..", "location '", location, "' leaves the model's folder ", quoted(folder_),
                 " ('..' is not allowed)");
  if (canonical_folder_.empty()) {
    std::error_code ec;
    canonical_folder_ = fs::canonical(folder_, ec);
    STRATA_CHECK(!ec, "the model's folder ", quoted(folder_), " cannot be resolved: ", ec.message());
  }
  // Symbolic links are followed as far as the path exists; where they lead must still be
  // inside the folder (a missing file is reported by the read that follows).
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(canonical_folder_ / loc, ec);
  STRATA_CHECK(!ec, "location '", location, "' in ", quoted(folder_), " cannot be resolved: ", ec.message());
  const fs::path rel = file.lexically_relative(canonical_folder_);
  STRATA_CHECK(!rel.empty() && rel != "." && *rel.begin() != "..", "location '", location, "' resolves to ",
               quoted(file), ", outside the model's folder ", quoted(canonical_folder_),
               " (through a symbolic link)");
  return file;
}

void ExternalData::check_sha1(const fs::path& file, const std::string& location, const std::string& checksum) {
  std::string want = checksum;
  std::transform(want.begin(), want.end(), want.begin(), [](char c) { return c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c; });
  STRATA_CHECK(want.size() == 40 && want.find_first_not_of("0123456789abcdef") == std::string::npos, "checksum '",
               checksum, "' of '", location, "' is not a SHA-1 (40 hexadecimal digits)");
#if STRATA_ONNX_SHA1
  auto it = sha1_.find(file);
  if (it == sha1_.end()) it = sha1_.emplace(file, sha1_of_file(file)).first;
  STRATA_CHECK(it->second == want, "'", location, "' in ", quoted(folder_), " has SHA-1 ", it->second,
               " but its checksum says ", want, " (the file is not the one the model was saved with)");
#else
  (void)file;
  STRATA_FAIL("'", location, "' has a checksum, which this build of strata cannot verify (built without nettle's "
              "SHA-1: install nettle-dev and configure again)");
#endif
}

ExternalRange ExternalData::locate(const ExternalEntries& entries, uint64_t bytes) {
  std::map<std::string, std::string> keys;
  for (const auto& [key, value] : entries) {
    STRATA_CHECK(key == "location" || key == "offset" || key == "length" || key == "checksum" || key == "basepath",
                 "external_data key '", key, "' is not supported (strata reads location, offset, length, checksum)");
    STRATA_CHECK(keys.emplace(key, value).second, "external_data gives '", key, "' twice");
  }
  const bool has_location = keys.count("location") > 0;
  const std::string location = has_location ? keys.at("location") : "";
  STRATA_CHECK(!folder_.empty(), "the model was read from memory, so its folder is unknown: load it from its file "
               "(onnx::load_model, strata_onnx_run)", location.empty() ? "" : " with '" + location + "' beside it");
  STRATA_CHECK(has_location, "external_data has no location");
  ExternalRange r;
  r.file = resolve(location);
  std::optional<uint64_t> length;
  if (keys.count("offset")) {
    const auto v = byte_count(keys["offset"]);
    STRATA_CHECK(v, "offset '", keys["offset"], "' of '", location, "' is not a byte count");
    r.offset = *v;
  }
  if (keys.count("length")) {
    length = byte_count(keys["length"]);
    STRATA_CHECK(length, "length '", keys["length"], "' of '", location, "' is not a byte count");
  }
  uint64_t size = 0;
  try {
    size = read_file_range(r.file, 0, {});  // a regular file, and its size
  } catch (const Error& e) {
    STRATA_FAIL("'", location, "' (in the model's folder ", quoted(folder_), "): ", e.what());
  }
  STRATA_CHECK(r.offset <= size, "offset ", r.offset, " is past the end of '", location, "' (", size, " bytes)");
  if (!length) {
    STRATA_CHECK(size - r.offset == bytes, "the tensor takes ", bytes, " bytes but '", location, "' holds ",
                 size - r.offset, " from offset ", r.offset, " to its end (no length given)");
  } else {
    STRATA_CHECK(*length == bytes, "length ", *length, " of '", location, "' is not the tensor's ", bytes, " bytes");
    STRATA_CHECK(*length <= size - r.offset, bytes, " bytes from offset ", r.offset, " lie past the end of '",
                 location, "' (", size, " bytes)");
  }
  if (keys.count("checksum")) check_sha1(r.file, location, keys["checksum"]);
  return r;
}

}  // namespace strata::onnx::detail
