// Opening files for reading with clear errors (tt/file.h).
#include "tt/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "tt/error.h"

namespace tt {

ReadOnlyFile::ReadOnlyFile(const std::string& path, const std::string& what)
    : path_(path), what_(what) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TT_CHECK(fd_ >= 0, "cannot open ", what, " '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(std::exchange(fd_, -1));
    TT_THROW("cannot stat ", what, " '", path, "': ", std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(std::exchange(fd_, -1));
    TT_THROW(what, " '", path, "' is a directory");
  }
  size_ = S_ISREG(st.st_mode) ? static_cast<std::size_t>(st.st_size) : 0;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)),
      what_(std::move(other.what_)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

std::size_t ReadOnlyFile::read(void* buffer, std::size_t n) const {
  TT_CHECK(fd_ >= 0, "reading ", what_, " '", path_, "': the file is not open");
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd_, static_cast<char*>(buffer) + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    TT_CHECK(got >= 0, "error reading ", what_, " '", path_, "': ", std::strerror(errno));
    if (got == 0) break;  // end of file
    done += static_cast<std::size_t>(got);
  }
  return done;
}

int ReadOnlyFile::release() noexcept {
  size_ = 0;
  return std::exchange(fd_, -1);
}

}  // namespace tt
