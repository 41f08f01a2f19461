#pragma once
// Files as strata reads and writes them: one place for what a path may be.
//
// Reading: every reader of the project (dataset files, images, checkpoints) goes
// through read_regular_file (or read_file_range for part of a file). It refuses what is not a regular file — a directory, a
// FIFO, a device node such as /dev/zero or /dev/urandom, a socket — before reading a
// byte (a FIFO is opened non-blocking, so a missing writer cannot hang it), and it
// never reads more than the size the open descriptor reports: a file that grows,
// shrinks or claims no size (procfs) is an error, not an unbounded read.
//
// Writing: outputs are checked before a run starts (check_output_file), and a
// file that only one process may write is held with a FileLock.
//
// Every failure is a strata::Error naming the file and the reason.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// 'path', quoted for error messages.
std::string quoted(const std::filesystem::path& path);

// What an existing path is, for messages: "a regular file", "a directory", "a FIFO
// (named pipe)", "a character device", "a block device", "a socket", "a symbolic
// link"; nullopt when nothing exists there. Symbolic links are followed.
std::optional<std::string> file_kind(const std::filesystem::path& path);

inline constexpr uint64_t kNoSizeLimit = std::numeric_limits<uint64_t>::max();

// The bytes of the regular file `path` (symbolic links followed). Refuses a missing
// file ("no such file"), anything that is not a regular file (naming what it is) and
// files above `max_bytes` (naming both sizes), and reads exactly the size fstat
// reports.
std::vector<uint8_t> read_regular_file(const std::filesystem::path& path, uint64_t max_bytes = kNoSizeLimit);

// Fills `out` with the bytes of the regular file `path` from byte `offset` (a part of a
// file that holds many: ONNX's external data), with read_regular_file's refusals; a range
// that does not lie within the file is an error naming the range and the file's size,
// checked before a byte is read. Returns the file's size.
uint64_t read_file_range(const std::filesystem::path& path, uint64_t offset, std::span<uint8_t> out);

// The identity (device, inode) of an existing file, so "is this the same file" holds
// through symbolic links, hard links and other spellings of a path.
struct FileId {
  uint64_t device = 0, inode = 0;
  bool operator==(const FileId&) const = default;
};
std::optional<FileId> file_id(const std::filesystem::path& path);

// Whether `a` and `b` name the same file: the same inode when both exist, else the
// same absolute, normalised path (two outputs not created yet).
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// Checks, before any work, that `path` can be written as the output `what` (an
// option name, "--checkpoint"): it is absent or an existing regular file, its folder
// exists or can be created (it is created), and a trial file there
// ("<path>.tmp.<pid>") can be given `bytes` bytes (posix_fallocate), written and
// synced. The trial file is removed. A read-only folder, a full disk or a file-size
// limit therefore fails here, naming the path and the reason, instead of after the
// first epoch. A path that cannot even be examined (a name longer than the file
// system allows, a folder without search permission) is refused with that cause alone.
void check_output_file(const std::filesystem::path& path, uint64_t bytes, std::string_view what);

// The temporaries "<path>.tmp.<pid>" (check_output_file's trial, safetensors' atomic
// save) whose writer no longer runs (kill(pid, 0) says ESRCH) and that were last
// written at least `min_age` ago: removes them (best effort) and returns those removed.
// A writer in another PID namespace looks dead from here but keeps its file fresh:
// `min_age` spares it, unless the caller holds the path's FileLock, which such a
// writer would need too.
std::vector<std::filesystem::path> remove_stale_temporaries(const std::filesystem::path& path,
                                                            std::chrono::seconds min_age);

// An advisory lock (flock, exclusive) on "<path>.lock" for the lifetime of the
// object, so two processes never write `path` at once. The lock file holds the
// holder's pid and is removed when the lock is released (a process killed while
// holding it leaves the file, whose lock the kernel has already released: the next
// holder takes it). A second holder gets a strata::Error naming `what`, the path and
// the pid of the first.
class FileLock {
 public:
  FileLock(const std::filesystem::path& path, std::string_view what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::filesystem::path& lock_path() const { return lock_path_; }
  // The pid that a holder killed while holding the lock left in its file, when this
  // lock took such a file over; "" otherwise.
  const std::string& stale_holder() const { return stale_holder_; }

 private:
  std::filesystem::path lock_path_;
  int fd_ = -1;
  std::string stale_holder_;
};

}  // namespace strata
