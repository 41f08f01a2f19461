#pragma once
// Whole-file reads for the dataset readers. Every failure is a strata::Error that
// names the file and says what went wrong (missing, not a file, unreadable,
// corrupt or truncated gzip stream).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace strata::data {

// 'path', quoted for error messages.
std::string quoted(const std::filesystem::path& path);

// The bytes of `path`.
std::vector<uint8_t> read_file(const std::filesystem::path& path);

// True if `bytes` start with the gzip magic (1f 8b).
bool is_gzip(const std::vector<uint8_t>& bytes);

// Inflates a gzip stream (several concatenated members allowed, as gzip(1) writes
// them). `what` names the source in error messages.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& bytes, const std::string& what);

// read_file(), then gunzip() if the content is gzip (decided by the magic bytes, not
// the file name).
std::vector<uint8_t> read_file_maybe_gzip(const std::filesystem::path& path);

// The first of `candidates` that exists; otherwise throws listing all of them.
std::filesystem::path first_existing(const std::vector<std::filesystem::path>& candidates,
                                     const std::string& what);

}  // namespace strata::data
