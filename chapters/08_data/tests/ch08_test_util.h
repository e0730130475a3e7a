// Helpers of chapter 08's tests (chapter 09's include them too): temporary directories, raw
// file reads and writes, random bytes, header patches, the identity byte table.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tt/generator.h"
#include "tt/testing.h"

namespace tt::test08 {

/// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "tt_test_";
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

}  // namespace tt::test08
