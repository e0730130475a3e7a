/// @file shards.h
/// @brief Token shards in llm.c's format, read through a read-only memory map.
///
/// A shard is a 1024-byte header of 256 little-endian int32 followed by the tokens:
///
/// | bytes           | content                                                     |
/// |-----------------|-------------------------------------------------------------|
/// | 0..3            | magic: 20240520 (uint16 tokens) or 20240801 (uint32 tokens) |
/// | 4..7            | version: 1 (with 20240520) or 7 (with 20240801)             |
/// | 8..11           | number of tokens N                                          |
/// | 12..1023        | zero                                                        |
/// | 1024..          | N tokens, uint16 or uint32 little-endian                    |
///
/// GPT-2 shards of llm.c (magic 20240520, version 1) can be read as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tt {

/// Constants of the shard format.
namespace shard_format {
inline constexpr int64_t kHeaderInts = 256;               ///< header size in int32
inline constexpr int64_t kHeaderBytes = kHeaderInts * 4;  ///< header size in bytes (1024)
inline constexpr int32_t kMagicU16 = 20240520;            ///< llm.c GPT-2 shards: uint16 tokens
inline constexpr int32_t kVersionU16 = 1;                 ///< version paired with kMagicU16
inline constexpr int32_t kMagicU32 = 20240801;            ///< llm.c LLaMA-3 shards: uint32 tokens
inline constexpr int32_t kVersionU32 = 7;                 ///< version paired with kMagicU32
inline constexpr int64_t kMaxU16Vocab = 65536;            ///< uint16 tokens need vocab <= this
}  // namespace shard_format

/// A read-only memory map of a whole file (RAII: unmapped and closed on destruction). Pages are
/// loaded on first access, so files larger than memory work.
class MappedFile {
 public:
  /// Maps `path`; throws tt::Error naming the file (as `what`, e.g. "token shard") and the
  /// system error, or saying `WHAT 'PATH' is a directory` (see tt::ReadOnlyFile).
  explicit MappedFile(const std::string& path, const std::string& what = "file");
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  /// Takes over the mapping of `other` (which becomes empty).
  MappedFile(MappedFile&& other) noexcept;
  /// Releases this mapping and takes over the one of `other`.
  MappedFile& operator=(MappedFile&& other) noexcept;

  /// First byte of the file (nullptr for an empty file).
  const uint8_t* data() const { return data_; }
  /// File size in bytes.
  std::size_t size() const { return size_; }
  /// The path it was opened with.
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
};

/// A validated, memory-mapped shard. The header is checked when opening (size, magic, version,
/// token count against the file size); token values are checked against `vocab_size` when read,
/// so opening a huge shard costs nothing. Every error names the file and the byte offset.
class TokenShard {
 public:
  /// Opens and validates `path`; tokens must be < vocab_size.
  TokenShard(const std::string& path, int64_t vocab_size);

  /// Number of tokens.
  int64_t num_tokens() const { return num_tokens_; }
  /// Bytes per token: 2 or 4.
  int token_size() const { return token_size_; }
  /// The vocabulary size tokens are checked against.
  int64_t vocab_size() const { return vocab_size_; }
  /// The path.
  const std::string& path() const { return file_.path(); }
  /// Token i (0 <= i < num_tokens()); throws tt::Error naming the file and byte offset when
  /// i is out of range or the token is >= vocab_size().
  int64_t token(int64_t i) const;
  /// Reads every token once (token()'s checks); for tools that want to fail early.
  void validate_tokens() const;

 private:
  MappedFile file_;
  int64_t vocab_size_ = 0;
  int64_t num_tokens_ = 0;
  int token_size_ = 2;
};

/// Writes `tokens` as a shard: uint16 (magic 20240520, version 1) when vocab_size <= 65536,
/// otherwise uint32 (magic 20240801, version 7). Throws tt::Error naming the file when a token
/// is outside [0, vocab_size) or writing fails.
void write_shard(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size);

}  // namespace tt
