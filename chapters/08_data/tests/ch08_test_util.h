// Helpers of chapter 08's tests (chapter 09's include them too): temporary directories, raw
// file reads and writes, random bytes, header patches, the identity byte table, running a
// program of the build (tt_prepare_data, train_gpt2).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tt/generator.h"
#include "tt/temp_dir.h"
#include "tt/testing.h"

namespace tt::test08 {

/// The tests' temporary directory (one per test and process: tt/temp_dir.h).
using tt::testing::TempDir;

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

/// The path of the program `name` (tt_prepare_data; chapters 09-12 run train_gpt2): next to
/// this test binary (bin/), or one folder up for the starter build's binary (bin/starter/).
/// Empty when it is missing.
inline std::string program_path(const std::string& name) {
  const std::filesystem::path exe_dir =
      std::filesystem::read_symlink("/proc/self/exe").parent_path();
  for (const std::filesystem::path& dir : {exe_dir, exe_dir.parent_path()}) {
    if (std::filesystem::exists(dir / name)) return (dir / name).string();
  }
  return "";
}

/// The exit status and the combined stdout/stderr of one program run.
struct RunResult {
  int status = -1;      ///< exit status (-1: ended by a signal)
  std::string output;   ///< stdout and stderr
  bool killed = false;  ///< ended by SIGKILL (directly, or as the shell's status 128 + 9)
};

/// Runs `program args` through the shell, its stdout and stderr written to the file `log`.
inline RunResult run_program(const std::string& program, const std::string& args,
                             const std::string& log) {
  const int rc = std::system((program + " " + args + " > '" + log + "' 2>&1").c_str());
  const bool killed = (WIFSIGNALED(rc) && WTERMSIG(rc) == SIGKILL) ||
                      (WIFEXITED(rc) && WEXITSTATUS(rc) == 128 + SIGKILL);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read_bytes(log), killed};
}

/// Success when `text` contains `needle`; otherwise a failure that shows the whole text (a
/// program's output).
inline ::testing::AssertionResult contains(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << needle << "\" not in the output:\n" << text;
}

}  // namespace tt::test08
