#pragma once
// Whole-file reads for the dataset readers, on top of core/file.h's
// read_regular_file (regular files only, never more than their size). Every failure
// is a strata::Error that names the file and says what went wrong (missing, not a
// regular file, unreadable, corrupt or truncated gzip stream, inflating past a limit).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/core/file.h"

namespace strata::data {

// True if `bytes` start with the gzip magic (1f 8b).
bool is_gzip(const std::vector<uint8_t>& bytes);

// Inflates a gzip stream (several concatenated members allowed, as gzip(1) writes
// them). `what` names the source in error messages. At most `limit` + 1 bytes are
// inflated: a stream that holds more returns its first limit + 1 bytes, so the
// caller, who knows how much it needs, reports "longer than" without inflating a
// decompression bomb.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& bytes, const std::string& what,
                            uint64_t limit = kNoSizeLimit);

// The first of `candidates` that exists; otherwise throws listing all of them.
std::filesystem::path first_existing(const std::vector<std::filesystem::path>& candidates,
                                     const std::string& what);

}  // namespace strata::data
