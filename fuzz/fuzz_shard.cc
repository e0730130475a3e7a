// Fuzzes the token-shard reader of chapter 08 (tt::TokenShard through its memory map,
// make_batch and the DataLoader). Each input is written to a temporary file and opened as a
// shard with a vocabulary of 1000 tokens.
//
// Properties: any file either opens or throws tt::Error (never crash or read outside the map);
// an opened shard's header matches the file length exactly; token(i) returns the little-endian
// value at byte 1024 + i * token_size when it is below the vocabulary size and throws tt::Error
// otherwise, and every index outside [0, N) (including the extremes of int64) throws;
// make_batch returns exactly the window's tokens or throws tt::Error, for any start, batch size
// and sequence length; a DataLoader over the file yields batches or throws tt::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "fuzz_util.h"
#include "tt/dataloader.h"
#include "tt/error.h"
#include "tt/shards.h"

namespace {

using tt::fuzz::require;

constexpr int64_t kVocab = 1000;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

/// A temporary file for this process, removed at exit: in /dev/shm when there is one (no disk
/// I/O), else in the system's temporary directory. It stays open, and each input overwrites it
/// in place (pwrite + ftruncate): truncating it to 0 and closing it made ext4 flush it to disk
/// on every input (300 executions/s instead of 6000).
class TempFile {
 public:
  TempFile() {
    for (const std::filesystem::path& dir :
         {std::filesystem::path("/dev/shm"), std::filesystem::temp_directory_path()}) {
      path_ = (dir / "tt_fuzz_shard_XXXXXX").string();
      fd_ = ::mkstemp(path_.data());
      if (fd_ >= 0) return;
    }
    require(false, "cannot create a temporary file");
  }
  ~TempFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  void write(const uint8_t* data, std::size_t size) const {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      require(n > 0, "cannot write the temporary file");
      done += static_cast<std::size_t>(n);
    }
    require(::ftruncate(fd_, static_cast<off_t>(size)) == 0, "cannot truncate the temporary file");
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

/// The token at index i as the file stores it (no checks: i must be in range).
int64_t stored_token(const uint8_t* data, int token_size, int64_t i) {
  const uint8_t* p = data + tt::shard_format::kHeaderBytes + i * token_size;
  int64_t v = 0;
  for (int b = 0; b < token_size; ++b) v |= static_cast<int64_t>(p[b]) << (8 * b);
  return v;
}

void check_tokens(const tt::TokenShard& shard, const uint8_t* data) {
  const int64_t n = shard.num_tokens();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t expected = stored_token(data, shard.token_size(), i);
    try {
      require(shard.token(i) == expected, "token(i) differs from the stored value");
      require(expected < kVocab, "token(i) returned a token >= the vocabulary size");
    } catch (const tt::Error&) {
      require(expected >= kVocab, "token(i) rejected a valid token");
    }
  }
  for (const int64_t i : {int64_t{-1}, n, n + 1, kMin, kMax}) {
    bool threw = false;
    try {
      (void)shard.token(i);
    } catch (const tt::Error&) {
      threw = true;
    }
    require(threw, "token(i) accepted an index outside [0, N)");
  }
}

/// make_batch either fails with tt::Error or returns the window [start, start + B*T].
void check_batch(const tt::TokenShard& shard, const uint8_t* data, int64_t start, int64_t B,
                 int64_t T) {
  tt::Batch batch;
  try {
    batch = tt::make_batch(shard, start, B, T);
  } catch (const tt::Error&) {
    return;
  }
  int64_t window = 0;
  require(B > 0 && T > 0 && start >= 0 && !__builtin_mul_overflow(B, T, &window) &&
              window < shard.num_tokens() - start,
          "make_batch accepted a window outside the shard");
  const int64_t* inputs = batch.inputs.data<int64_t>();
  const int64_t* targets = batch.targets.data<int64_t>();
  for (int64_t i = 0; i < B * T; ++i) {
    require(inputs[i] == stored_token(data, shard.token_size(), start + i) &&
                targets[i] == stored_token(data, shard.token_size(), start + i + 1),
            "make_batch returned the wrong tokens");
  }
}

void check_batches(const tt::TokenShard& shard, const uint8_t* data) {
  const int64_t n = shard.num_tokens();
  const std::pair<int64_t, int64_t> sizes[] = {
      {1, 1}, {2, 3}, {1, n}, {kMax, 2}, {int64_t{1} << 32, int64_t{1} << 32}, {-1, 5}, {0, 1}};
  for (const auto& [B, T] : sizes) {
    for (const int64_t start : {int64_t{0}, int64_t{1}, n - 2, n - 1, n, int64_t{-1}, kMin, kMax})
      check_batch(shard, data, start, B, T);
  }
}

void check_dataloader(const std::string& path) {
  std::optional<tt::DataLoader> loader;
  try {
    loader.emplace(std::vector<std::string>{path},
                   tt::DataLoaderOptions{
                       .batch_size = 2, .seq_len = 3, .vocab_size = kVocab, .shuffle = true});
  } catch (const tt::Error&) {
    return;
  }
  try {
    for (int64_t i = 0; i <= loader->batches_per_epoch(); ++i) (void)loader->next();
  } catch (const tt::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const TempFile file;
  file.write(data, size);
  std::optional<tt::TokenShard> shard;
  try {
    shard.emplace(file.path(), kVocab);
  } catch (const tt::Error&) {
    return 0;  // rejected with a message: fine
  }
  require(tt::shard_format::kHeaderBytes + shard->num_tokens() * shard->token_size() ==
              static_cast<int64_t>(size),
          "the shard's header does not match the file length");
  check_tokens(*shard, data);
  check_batches(*shard, data);
  check_dataloader(file.path());
  return 0;
}
