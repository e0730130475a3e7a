/// @file file.h
/// @brief Opening a file for reading, with the same clear errors in every loader of the project
/// (checkpoints, tokenizers, token shards, llm.c model files, .npy arrays, text corpora): a
/// directory given where a file is expected says "is a directory", any other failure names the
/// file and the system's reason.
#pragma once

#include <cstddef>
#include <string>

namespace tt {

/// A file opened read-only (RAII: closed on destruction, movable, not copyable).
///
/// Errors are tt::Error whose message names `what` (WHAT: the kind of file, e.g. "checkpoint",
/// "tokenizer", "token shard") and the path (PATH):
/// - `WHAT 'PATH' is a directory` when the path names a directory;
/// - `cannot open WHAT 'PATH': strerror(errno)` when open(2) fails (missing file, no
///   permission, ...);
/// - `error reading WHAT 'PATH': strerror(errno)` when read(2) fails.
class ReadOnlyFile {
 public:
  /// Opens `path` for reading (O_RDONLY | O_CLOEXEC) and refuses a directory.
  ReadOnlyFile(const std::string& path, const std::string& what);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  /// Takes over the descriptor of `other` (which is left closed).
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  /// Closes this file and takes over the descriptor of `other`.
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;

  /// The descriptor (-1 after release() or a move).
  int fd() const { return fd_; }
  /// The size fstat(2) reported when opening (0 for pipes and other streams).
  std::size_t size() const { return size_; }
  /// The path it was opened with.
  const std::string& path() const { return path_; }
  /// The kind of file, as given to the constructor (for messages).
  const std::string& what() const { return what_; }
  /// Reads up to `n` bytes at the current position into `buffer` (retrying on EINTR and short
  /// reads); returns fewer than `n` only at the end of the file.
  std::size_t read(void* buffer, std::size_t n) const;
  /// Gives up ownership: returns the descriptor, which the caller must close.
  int release() noexcept;

 private:
  std::string path_, what_;
  std::size_t size_ = 0;
  int fd_ = -1;
};

/// The whole content of `path` (see ReadOnlyFile for the errors), read to the end of the file
/// (so pipes such as `<(cmd)` work too). `Bytes` is a contiguous container of 1-byte elements
/// with resize(): std::string (the default), std::vector<std::byte> or std::vector<char>.
template <typename Bytes = std::string>
Bytes read_whole_file(const std::string& path, const std::string& what) {
  static_assert(sizeof(typename Bytes::value_type) == 1, "read_whole_file reads bytes");
  const ReadOnlyFile file(path, what);
  Bytes out;
  out.resize(file.size() + 1);  // one byte more than the size: the last read sees the end
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) out.resize(out.size() * 2);
    const std::size_t want = out.size() - have;
    const std::size_t got = file.read(out.data() + have, want);
    have += got;
    if (got < want) break;
  }
  out.resize(have);
  return out;
}

}  // namespace tt
