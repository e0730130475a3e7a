// Tests of common/'s file reading (tt/file.h): the one place every loader opens its input, so a
// directory, a missing file and a pipe give the same answers everywhere.
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tt/file.h"
#include "tt/testing_common.h"

namespace tt {
namespace {

/// A fresh directory under the system's temporary directory, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    std::string t = (std::filesystem::temp_directory_path() / "tt_file_test_XXXXXX").string();
    path_ = ::mkdtemp(t.data()) != nullptr ? t : "";
    EXPECT_FALSE(path_.empty());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(Common_File, DirectoryIsNamedAsOne) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.file("ckpt"));
  EXPECT_TT_ERROR(ReadOnlyFile(dir.file("ckpt"), "checkpoint"), "checkpoint '",
                  dir.file("ckpt") + "' is a directory");
  EXPECT_TT_ERROR(read_whole_file(dir.file("ckpt"), "tokenizer"), "tokenizer '", "is a directory");
}

TEST(Common_File, MissingFileNamesTheSystemError) {
  ScratchDir dir;
  EXPECT_TT_ERROR(read_whole_file(dir.file("none.bin"), "token shard"),
                  "cannot open token shard '" + dir.file("none.bin") + "'",
                  "No such file or directory");
}

TEST(Common_File, ReadsWholeFiles) {
  ScratchDir dir;
  std::string text(100000, 'x');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7 % 256);
  write(dir.file("a"), text);
  write(dir.file("empty"), "");
  EXPECT_EQ(read_whole_file(dir.file("a"), "file"), text);
  EXPECT_EQ(read_whole_file(dir.file("empty"), "file"), "");
  const auto bytes = read_whole_file<std::vector<std::byte>>(dir.file("a"), "file");
  ASSERT_EQ(bytes.size(), text.size());
  EXPECT_EQ(static_cast<char>(bytes[12345]), text[12345]);
  const ReadOnlyFile f(dir.file("a"), "file");
  EXPECT_EQ(f.size(), text.size());
  EXPECT_EQ(f.path(), dir.file("a"));
  EXPECT_EQ(f.what(), "file");
}

TEST(Common_File, ReadsPipesToTheEnd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string text = "through a pipe\n";
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  EXPECT_EQ(read_whole_file("/dev/fd/" + std::to_string(fds[0]), "input"), text);
  ::close(fds[0]);
}

TEST(Common_File, MoveKeepsOneOwner) {
  ScratchDir dir;
  write(dir.file("a"), "abc");
  ReadOnlyFile a(dir.file("a"), "file");
  const int fd = a.fd();
  ReadOnlyFile b(std::move(a));
  EXPECT_EQ(b.fd(), fd);
  EXPECT_EQ(a.fd(), -1);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  char buf[8];
  EXPECT_EQ(b.read(buf, sizeof buf), 3u);
  EXPECT_TT_ERROR((void)a.read(buf, 1), "not open");
  const int raw = b.release();
  EXPECT_EQ(raw, fd);
  ::close(raw);
}

}  // namespace
}  // namespace tt
