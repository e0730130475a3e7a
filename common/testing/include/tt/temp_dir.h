/// @file temp_dir.h
/// @brief The temporary directory of a test (every chapter's tests and common's use this one).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace tt::testing {

/// A fresh directory under the system temp dir, removed with its contents on destruction:
/// `<tmp>/tt_test_<Suite>_<Test>_<pid>` (outside a test: `tt_test_<pid>`). The process id keeps
/// two runs of the same test apart (another checkout's build, ctest -j), which would otherwise
/// share the directory and delete each other's files.
class TempDir {
 public:
  /// Creates the directory (an earlier one of the same name is removed first).
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "tt_test_";
    if (info != nullptr) name += std::string(info->test_suite_name()) + "_" + info->name() + "_";
    for (char& c : name) {
      if (c == '/') c = '_';  // parameterized tests: "Suite/Case/0"
    }
    name += std::to_string(::getpid());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  /// Removes the directory and everything in it.
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
  /// The directory as a path.
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tt::testing
