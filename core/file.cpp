#include "strata/core/file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <optional>

#include "strata/core/error.h"

namespace strata {

namespace fs = std::filesystem;

namespace {

const char* kind_of(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "a special file";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

[[noreturn]] void fail_open(const fs::path& path, int e) {
  if (e == ENOENT) STRATA_FAIL("cannot open ", quoted(path), ": no such file");
  if (e == ENOTDIR) STRATA_FAIL("cannot open ", quoted(path), ": no such file (a folder on its path is not a directory)");
  STRATA_FAIL("cannot open ", quoted(path), ": ", std::strerror(e));
}

// Ignores SIGXFSZ while alive: a write past RLIMIT_FSIZE then fails with EFBIG, which
// the caller reports, instead of killing the process.
class IgnoreFileSizeSignal {
 public:
  IgnoreFileSizeSignal() {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigemptyset(&ign.sa_mask);
    ok_ = ::sigaction(SIGXFSZ, &ign, &old_) == 0;
  }
  ~IgnoreFileSizeSignal() {
    if (ok_) ::sigaction(SIGXFSZ, &old_, nullptr);
  }
  IgnoreFileSizeSignal(const IgnoreFileSizeSignal&) = delete;
  IgnoreFileSizeSignal& operator=(const IgnoreFileSizeSignal&) = delete;

 private:
  struct sigaction old_ {};
  bool ok_ = false;
};

// The pid a FileLock holder wrote into its lock file ("" if none).
std::string pid_in(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid;
}

}  // namespace

std::string quoted(const fs::path& path) {
  std::string s;
  s.reserve(path.native().size() + 2);
  s += '\'';
  s += path.native();
  s += '\'';
  return s;
}

std::optional<std::string> file_kind(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return std::string(kind_of(st.st_mode));
  if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
  return std::string("a path that cannot be examined (") + std::strerror(errno) + ")";
}

namespace {

// Opens the regular file `path` for reading and gives its size; refuses anything else
// (see read_regular_file).
uint64_t open_regular(const fs::path& path, std::optional<Fd>& fd) {
  // stat first: opening a device node can have effects of its own (a tape rewinds).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail_open(path, errno);
  STRATA_CHECK(S_ISREG(st.st_mode), "cannot read ", quoted(path), ": it is ", kind_of(st.st_mode),
               ", not a regular file");
  // O_NONBLOCK: if the path was swapped for a FIFO since the stat, open must not wait
  // for a writer; fstat below then refuses it.
  fd.emplace(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd->get() < 0) fail_open(path, errno);
  if (::fstat(fd->get(), &st) != 0) STRATA_FAIL("cannot read ", quoted(path), ": fstat: ", std::strerror(errno));
  STRATA_CHECK(S_ISREG(st.st_mode), "cannot read ", quoted(path), ": it is ", kind_of(st.st_mode),
               ", not a regular file");
  return static_cast<uint64_t>(st.st_size);
}

// Reads out.size() bytes at `offset` of the open file of `size` bytes.
void read_at(int fd, const fs::path& path, uint64_t offset, std::span<uint8_t> out, uint64_t size) {
  size_t done = 0;
  while (done < out.size()) {
    const size_t want = std::min<size_t>(out.size() - done, size_t{1} << 30);
    const ssize_t n = ::pread(fd, out.data() + done, want, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      STRATA_FAIL("error reading ", quoted(path), ": ", std::strerror(errno));
    }
    STRATA_CHECK(n > 0, "error reading ", quoted(path), ": it ended at byte ", offset + done, " of its ", size,
                 " bytes (it shrank while being read)");
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::vector<uint8_t> read_regular_file(const fs::path& path, uint64_t max_bytes) {
  std::optional<Fd> fd;
  const uint64_t size = open_regular(path, fd);
  STRATA_CHECK(size <= max_bytes, "cannot read ", quoted(path), ": its ", size, " bytes exceed the limit of ",
               max_bytes, " bytes for this kind of file");
  std::vector<uint8_t> out;
  try {
    out.resize(size);
  } catch (const std::bad_alloc&) {
    STRATA_FAIL("cannot read ", quoted(path), ": its ", size, " bytes do not fit in memory");
  }
  read_at(fd->get(), path, 0, out, size);
  uint8_t extra = 0;
  ssize_t n;
  do {
    n = ::pread(fd->get(), &extra, 1, static_cast<off_t>(size));
  } while (n < 0 && (errno == EINTR || errno == EAGAIN));
  STRATA_CHECK(n == 0, "error reading ", quoted(path), ": it holds more than the ", size,
               " bytes its size says (it grew while being read, or is a kernel file such as those of /proc)");
  return out;
}

uint64_t read_file_range(const fs::path& path, uint64_t offset, std::span<uint8_t> out) {
  std::optional<Fd> fd;
  const uint64_t size = open_regular(path, fd);
  STRATA_CHECK(offset <= size && out.size() <= size - offset, "cannot read ", quoted(path), ": ", out.size(),
               " bytes from offset ", offset, " lie past its end (it holds ", size, " bytes)");
  read_at(fd->get(), path, offset, out, size);
  return size;
}

std::optional<FileId> file_id(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

bool same_file(const fs::path& a, const fs::path& b) {
  const auto ia = file_id(a), ib = file_id(b);
  if (ia && ib) return *ia == *ib;
  if (ia || ib) return false;
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ea), ea);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, eb), eb);
  return !ea && !eb && ca == cb;
}

void check_output_file(const fs::path& path, uint64_t bytes, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      STRATA_FAIL(what, " ", quoted(path), " is ", kind_of(st.st_mode),
                  ", not a regular file: refusing to write over it");
  } else if (errno != ENOENT && errno != ENOTDIR) {
    const int e = errno;
    std::string detail;
    if (e == ENAMETOOLONG) {  // say which limit: a name's, or the whole path's
      const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
      const long name_max = ::pathconf(parent.c_str(), _PC_NAME_MAX);
      const size_t name = path.filename().native().size();
      detail = name_max > 0 && name > static_cast<size_t>(name_max)
                   ? " (its name has " + std::to_string(name) + " bytes; this file system allows " +
                         std::to_string(name_max) + ")"
                   : " (the path has " + std::to_string(path.native().size()) + " bytes)";
    }
    STRATA_FAIL(what, " ", quoted(path), " cannot be written: ", std::strerror(e), detail,
                " (checked before starting, so nothing is lost)");
  }
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) STRATA_FAIL(what, " ", quoted(path), ": cannot create its folder ", quoted(parent), ": ", ec.message());
  const fs::path trial = path.string() + ".tmp." + std::to_string(::getpid());
  IgnoreFileSizeSignal keep_alive;
  const int fd = ::open(trial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    STRATA_FAIL(what, " ", quoted(path), ": cannot create a file in ", quoted(parent), ": ", std::strerror(errno),
                " (checked before starting, so nothing is lost)");
  int err = 0;
  const char* step = "";
  if (bytes > 0 && (err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes))) != 0) step = "reserving";
  if (err == 0 && ::pwrite(fd, "s", 1, 0) != 1) err = errno, step = "writing";
  if (err == 0 && ::fsync(fd) != 0) err = errno, step = "syncing";
  if (::close(fd) != 0 && err == 0) err = errno, step = "closing";
  ::unlink(trial.c_str());
  if (err != 0)
    STRATA_FAIL(what, " ", quoted(path), ": a trial write in ", quoted(parent), " failed (", step, " ", bytes,
                " bytes): ", std::strerror(err), " (checked before starting, so nothing is lost)");
}

std::vector<fs::path> remove_stale_temporaries(const fs::path& path, std::chrono::seconds min_age) {
  std::vector<fs::path> removed;
  std::error_code ec;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = path.filename().string() + ".tmp.";
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code tec;
    const auto written = fs::last_write_time(it->path(), tec);
    if (tec || now - written < min_age) continue;
    if (fs::remove(it->path(), tec)) removed.push_back(it->path());
  }
  return removed;
}

FileLock::FileLock(const fs::path& path, std::string_view what) : lock_path_(path.string() + ".lock") {
  bool existed = false;
  for (int attempt = 0;; ++attempt) {
    STRATA_CHECK(attempt < 100, what, " ", quoted(path), ": cannot lock ", quoted(lock_path_),
                 ": it keeps being replaced");
    // Created here, or found: a file found and then locked was left by a holder that died.
    int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    existed = fd < 0 && errno == EEXIST;
    if (existed) {
      fd = ::open(lock_path_.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT) continue;  // its holder let go in between
    }
    if (fd < 0)
      STRATA_FAIL(what, " ", quoted(path), ": cannot create its lock file ", quoted(lock_path_), ": ",
                  std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      const std::string holder = pid_in(fd);
      ::close(fd);
      if (e == EWOULDBLOCK)
        STRATA_FAIL(what, " ", quoted(path), " is being written by another process",
                    holder.empty() ? std::string() : " (pid " + holder + ")", ", which holds the lock ",
                    quoted(lock_path_),
                    ": two runs writing one file would replace each other's results; choose another path, or wait "
                    "until that run ends");
      STRATA_FAIL(what, " ", quoted(path), ": cannot lock ", quoted(lock_path_), ": ", std::strerror(e));
    }
    // The previous holder removes the file when it lets go; if that happened between
    // our open and our flock, we hold a lock on a file nobody else will open: retry.
    struct stat held {}, now {};
    if (::fstat(fd, &held) == 0 && ::stat(lock_path_.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino) {
      fd_ = fd;
      break;
    }
    ::close(fd);
  }
  // (An empty file found is one another process has just created, not locked yet.)
  if (existed) stale_holder_ = pid_in(fd_);
  // The pid only serves the second writer's message: the lock holds without it.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // while still holding the lock: see the constructor
  ::close(fd_);
}

}  // namespace strata
