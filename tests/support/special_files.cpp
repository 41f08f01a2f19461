#include "support/special_files.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace strata::testing {

namespace fs = std::filesystem;

fs::path make_fifo(const fs::path& dir, const std::string& name) {
  const fs::path p = dir / name;
  if (::mkfifo(p.c_str(), 0644) != 0) throw std::runtime_error("mkfifo " + p.string() + ": " + std::strerror(errno));
  return p;
}

fs::path make_device(const fs::path& dir, const std::string& name, Device d) {
  const fs::path p = dir / name;
  const dev_t numbers = d == Device::zero ? makedev(1, 5) : makedev(1, 9);
  if (::mknod(p.c_str(), S_IFCHR | 0644, numbers) != 0) return {};
  return p;
}

fs::path make_socket(const fs::path& dir, const std::string& name) {
  const fs::path p = dir / name;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (p.native().size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long: " + p.string());
  std::strcpy(addr.sun_path, p.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  ::close(fd);
  if (rc != 0) throw std::runtime_error("bind " + p.string() + ": " + std::strerror(errno));
  return p;
}

fs::path make_symlink(const fs::path& dir, const std::string& name, const fs::path& target) {
  const fs::path p = dir / name;
  fs::create_symlink(target, p);
  return p;
}

std::vector<SpecialFile> make_special_files(const fs::path& dir) {
  std::vector<SpecialFile> v;
  fs::create_directories(dir / "a_directory");
  v.push_back({"directory", dir / "a_directory", "a directory"});
  v.push_back({"fifo", make_fifo(dir, "a_fifo"), "a FIFO (named pipe)"});
  v.push_back({"socket", make_socket(dir, "a_socket"), "a socket"});
  v.push_back({"link_to_dev_zero", make_symlink(dir, "link_to_zero", "/dev/zero"), "a character device"});
  if (fs::path z = make_device(dir, "zero_copy", Device::zero); !z.empty())
    v.push_back({"zero_device", z, "a character device"});
  if (fs::path r = make_device(dir, "urandom_copy", Device::urandom); !r.empty())
    v.push_back({"urandom_device", r, "a character device"});
  return v;
}

}  // namespace strata::testing
