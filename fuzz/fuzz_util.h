#pragma once
// Shared by the fuzz targets (fuzz/*_fuzz.cpp). Each target defines
// LLVMFuzzerTestOneInput; built with -fsanitize=fuzzer it is a libFuzzer binary
// (fuzz/CMakeLists.txt, STRATA_FUZZ=ON), built with tests/reliability/corpus_replay.cpp
// it replays fuzz/corpus/<target>/ as a ctest regression test.
//
// The contract under test: for any bytes, a reader returns a valid result or throws
// strata::Error. A crash, a sanitizer report, a hang or any other exception type is a
// finding, so only strata::Error is caught here.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "strata/core/error.h"

namespace strata::fuzz {

// The file readers take a path, so each input goes through one scratch file per
// process (libFuzzer's -jobs/-fork children have their own pid).
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& target)
      : path_(dir() / ("strata_fuzz_" + target + "_" + std::to_string(::getpid()))) {}
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::filesystem::path& write(const uint8_t* data, size_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f) throw std::runtime_error("fuzz: cannot create scratch file " + path_.string());
    const size_t n = size ? std::fwrite(data, 1, size, f) : 0;
    std::fclose(f);
    if (n != size) throw std::runtime_error("fuzz: short write to " + path_.string());
    return path_;
  }

 private:
  // tmpfs when there is one: a disk file per input makes the kernel, not the reader,
  // the bottleneck (a third of the exec rate on ext4).
  static std::filesystem::path dir() {
    std::error_code ec;
    if (std::filesystem::is_directory("/dev/shm", ec)) return "/dev/shm";
    return std::filesystem::temp_directory_path();
  }
  std::filesystem::path path_;
};

// Runs fn; a strata::Error is the expected outcome for malformed input. The message
// must not be empty: an error that says nothing is a finding too.
template <class Fn>
void expect_ok_or_error(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    if (e.what()[0] == '\0') std::abort();
  }
}

// A result that violates the reader's documented contract is a silent wrong answer:
// abort so libFuzzer (and the replay test) report it with the input.
#define STRATA_FUZZ_ASSERT(cond)                                                             \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

}  // namespace strata::fuzz
