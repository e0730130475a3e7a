// Token shards (llm.c's format): the memory map, the validating reader and the writer.
#include "tt/shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "tt/error.h"
#include "tt/file.h"

namespace tt {
namespace {

uint32_t read_u32le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

// ----- MappedFile ---------------------------------------------------------------------------

MappedFile::MappedFile(const std::string& path, const std::string& what) : path_(path) {
  ReadOnlyFile file(path, what);  // refuses a directory, names the system error
  size_ = file.size();
  fd_ = file.release();
  if (size_ == 0) return;  // mmap of 0 bytes is an error; an empty file simply has no data
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    const std::size_t bytes = size_;
    release();
    TT_THROW("cannot map ", what, " '", path, "' (", bytes, " bytes): ", std::strerror(err));
  }
  data_ = static_cast<const uint8_t*>(p);
  ::madvise(p, size_, MADV_SEQUENTIAL);  // a hint only; failure is harmless
}

MappedFile::~MappedFile() {
  release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

// ----- TokenShard ---------------------------------------------------------------------------

TokenShard::TokenShard(const std::string& path, int64_t vocab_size)
    : file_(path, "token shard"), vocab_size_(vocab_size) {
  using namespace shard_format;
  TT_CHECK(vocab_size > 0, "TokenShard: '", path, "': vocab_size must be positive, got ",
           vocab_size);
  TT_CHECK(static_cast<int64_t>(file_.size()) >= kHeaderBytes, "TokenShard: '", path,
           "': truncated header: the file has ", file_.size(), " bytes, the header needs ",
           kHeaderBytes, " (offset 0)");
  const auto magic = static_cast<int32_t>(read_u32le(file_.data()));
  const auto version = static_cast<int32_t>(read_u32le(file_.data() + 4));
  const auto count = static_cast<int32_t>(read_u32le(file_.data() + 8));
  if (magic == kMagicU16) {
    TT_CHECK(version == kVersionU16, "TokenShard: '", path, "': unsupported version ", version,
             " at offset 4 (magic ", kMagicU16, " needs version ", kVersionU16, ")");
    token_size_ = 2;
  } else if (magic == kMagicU32) {
    TT_CHECK(version == kVersionU32, "TokenShard: '", path, "': unsupported version ", version,
             " at offset 4 (magic ", kMagicU32, " needs version ", kVersionU32, ")");
    token_size_ = 4;
  } else {
    TT_THROW("TokenShard: '", path, "': wrong magic ", magic, " at offset 0 (expected ", kMagicU16,
             " or ", kMagicU32, "): not a token shard");
  }
  TT_CHECK(count >= 0, "TokenShard: '", path, "': negative token count ", count, " at offset 8");
  num_tokens_ = count;
  const int64_t expected = kHeaderBytes + num_tokens_ * token_size_;
  TT_CHECK(static_cast<int64_t>(file_.size()) == expected, "TokenShard: '", path,
           "': the header (offset 8) says ", num_tokens_, " tokens of ", token_size_,
           " bytes, i.e. a file of ", expected, " bytes, but the file has ", file_.size(), " bytes",
           static_cast<int64_t>(file_.size()) < expected ? " (truncated)" : "");
}

int64_t TokenShard::token(int64_t i) const {
  TT_CHECK(i >= 0 && i < num_tokens_, "TokenShard: '", path(), "': token index ", i,
           " is out of range [0, ", num_tokens_, ")");
  const int64_t offset = shard_format::kHeaderBytes + i * token_size_;  // i is checked: no overflow
  const uint8_t* p = file_.data() + offset;
  const int64_t v = token_size_ == 2 ? static_cast<int64_t>(p[0] | (p[1] << 8))
                                     : static_cast<int64_t>(read_u32le(p));
  TT_CHECK(v < vocab_size_, "TokenShard: '", path(), "': token ", v, " at offset ", offset,
           " (token index ", i, ") is >= the vocabulary size ", vocab_size_);
  return v;
}

void TokenShard::validate_tokens() const {
  for (int64_t i = 0; i < num_tokens_; ++i) (void)token(i);
}

// ----- writer -------------------------------------------------------------------------------

void write_shard(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size) {
  using namespace shard_format;
  TT_CHECK(vocab_size > 0, "write_shard: '", path, "': vocab_size must be positive, got ",
           vocab_size);
  TT_CHECK(tokens.size() <= static_cast<std::size_t>(INT32_MAX), "write_shard: '", path,
           "': ", tokens.size(), " tokens do not fit the header's int32 count");
  const bool u16 = vocab_size <= kMaxU16Vocab;
  const int token_size = u16 ? 2 : 4;
  std::vector<uint8_t> buf(static_cast<std::size_t>(kHeaderBytes) + tokens.size() * token_size, 0);
  auto put = [&](std::size_t at, uint32_t v, int nbytes) {
    for (int b = 0; b < nbytes; ++b) buf[at + b] = static_cast<uint8_t>(v >> (8 * b));
  };
  put(0, static_cast<uint32_t>(u16 ? kMagicU16 : kMagicU32), 4);
  put(4, static_cast<uint32_t>(u16 ? kVersionU16 : kVersionU32), 4);
  put(8, static_cast<uint32_t>(tokens.size()), 4);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    TT_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size, "write_shard: '", path, "': token ",
             tokens[i], " at index ", i, " is outside [0, ", vocab_size, ")");
    put(static_cast<std::size_t>(kHeaderBytes) + i * token_size, static_cast<uint32_t>(tokens[i]),
        token_size);
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TT_CHECK(f.good(), "write_shard: cannot open '", path, "' for writing");
  f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  f.close();
  TT_CHECK(!f.fail(), "write_shard: error while writing '", path, "'");
}

}  // namespace tt
