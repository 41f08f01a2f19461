#pragma once
// Helpers for the data tests: a scratch directory, file writers for the real
// formats, and an assertion that a call throws strata::Error mentioning a string.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/core/error.h"

namespace strata::data::testing {

// A fresh directory under the system temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes);
void write_text(const std::filesystem::path& p, const std::string& text);
std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& raw);

// IDX bytes: magic 00 00 08 <ndims>, big-endian dims, then data.
std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data);

}  // namespace strata::data::testing

// Expects `stmt` to throw strata::Error whose message contains `needle`.
#define EXPECT_ERROR_MENTIONS(stmt, needle)                                                       \
  do {                                                                                             \
    try {                                                                                          \
      stmt;                                                                                        \
      ADD_FAILURE() << "expected strata::Error mentioning \"" << (needle) << "\" from: " #stmt;   \
    } catch (const ::strata::Error& e) {                                                           \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)                             \
          << "message \"" << e.what() << "\" does not mention \"" << (needle) << "\"";            \
    }                                                                                              \
  } while (0)
