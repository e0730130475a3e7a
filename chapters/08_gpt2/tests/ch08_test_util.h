// Test-local helpers of chapter 08: temporary directories, raw file writes, tiny models and batches.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tt/dataloader.h"
#include "tt/generator.h"
#include "tt/gpt2.h"
#include "tt/testing.h"

namespace tt::ch08_test {

/// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "tt_ch08_";
    if (info != nullptr) name += std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// The directory.
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// A GPT-2 small enough for unit tests: L=2, NH=2, C=16, V=50 (Vp=64), maxT=16.
inline gpt2::GPT2Config tiny_config() {
  return {.block_size = 16,
          .vocab_size = 50,
          .padded_vocab_size = 64,
          .n_layer = 2,
          .n_head = 2,
          .n_embd = 16};
}

/// A deterministic batch of B rows of T tokens < V (targets = inputs shifted by one), from `seed`.
inline Batch fixed_batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> w(static_cast<std::size_t>(B * T + 1));
  for (auto& t : w) t = static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(V));
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      x.push_back(w[static_cast<std::size_t>(b * T + t)]);
      y.push_back(w[static_cast<std::size_t>(b * T + t + 1)]);
    }
  }
  return {from_vector(x, {B, T}), from_vector(y, {B, T})};
}

/// Writes `bytes` to `path` (replacing it).
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The whole content of `path`.
inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

/// `n` random bytes (any values, so mostly invalid UTF-8) from `gen`.
inline std::string random_bytes(Generator& gen, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen.next_u64() & 0xFF);
  return s;
}

/// Overwrites 4 bytes of `data` at `at` with `v` in little-endian order (patching file headers).
inline void put_le32(std::string& data, std::size_t at, int32_t v) {
  for (int i = 0; i < 4; ++i) {
    data[at + i] = static_cast<char>((static_cast<uint32_t>(v) >> (8 * i)) & 0xFF);
  }
}

/// Byte ids of a trained tokenizer: byte b has id b.
inline std::array<int32_t, 256> identity_bytes() {
  std::array<int32_t, 256> ids{};
  for (int b = 0; b < 256; ++b) ids[b] = b;
  return ids;
}

}  // namespace tt::ch08_test
