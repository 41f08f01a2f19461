#pragma once
// Files that are not regular files, for the tests of readers and writers that must
// refuse them: a FIFO (a reader would wait for a writer forever), device nodes (a
// copy of /dev/zero or /dev/urandom never ends), a socket, a symbolic link to a device.
// Device nodes need CAP_MKNOD: make_device returns an empty path where mknod is not
// permitted, and the caller skips that case (GTEST_SKIP or a note).
#include <filesystem>
#include <string>
#include <vector>

namespace strata::testing {

std::filesystem::path make_fifo(const std::filesystem::path& dir, const std::string& name);
// A character device with the numbers of /dev/zero (1,5) or /dev/urandom (1,9).
enum class Device { zero, urandom };
std::filesystem::path make_device(const std::filesystem::path& dir, const std::string& name, Device d);
// A bound unix-domain socket (the file stays after the socket is closed).
std::filesystem::path make_socket(const std::filesystem::path& dir, const std::string& name);
std::filesystem::path make_symlink(const std::filesystem::path& dir, const std::string& name,
                                   const std::filesystem::path& target);

// One of each that this system permits, with what it is called in messages, for
// parameterised "refuses every kind" tests: a directory, a FIFO, a socket, a link to
// /dev/zero, and (with mknod) copies of /dev/zero and /dev/urandom.
struct SpecialFile {
  std::string label;            // "fifo", "zero_device", ...
  std::filesystem::path path;
  std::string kind;             // what the reader must name: "a FIFO (named pipe)", ...
};
std::vector<SpecialFile> make_special_files(const std::filesystem::path& dir);

}  // namespace strata::testing
