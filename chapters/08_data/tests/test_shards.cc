// Chapter 08: token shards in llm.c's format (writer/reader round trip, every rejection).
#include "ch08_test_util.h"
#include "tt/shards.h"

namespace tt {
namespace {

using test08::read_bytes;
using test08::TempDir;
using test08::write_bytes;

int32_t header_int(const std::string& data, int i) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b)
    v |= static_cast<uint32_t>(static_cast<uint8_t>(data[4 * i + b])) << (8 * b);
  return static_cast<int32_t>(v);
}

TEST(Ch08_Shards, Uint16RoundTripWithLlmcHeader) {
  TempDir dir;
  const std::vector<int32_t> tokens = {50256, 0, 1, 65535 % 50257, 42, 31337};
  write_shard(dir.file("a.bin"), tokens, 50257);
  const std::string data = read_bytes(dir.file("a.bin"));
  ASSERT_EQ(data.size(), 1024 + 2 * tokens.size());
  EXPECT_EQ(header_int(data, 0), 20240520);
  EXPECT_EQ(header_int(data, 1), 1);
  EXPECT_EQ(header_int(data, 2), static_cast<int32_t>(tokens.size()));
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header_int(data, i), 0) << "header int " << i;
  const TokenShard shard(dir.file("a.bin"), 50257);
  EXPECT_EQ(shard.num_tokens(), static_cast<int64_t>(tokens.size()));
  EXPECT_EQ(shard.token_size(), 2);
  for (std::size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(shard.token(i), tokens[i]);
  shard.validate_tokens();
  EXPECT_TT_ERROR(shard.token(6), "a.bin", "token index 6", "[0, 6)");
  // Found by fuzz_shard: the byte offset of an extreme index overflowed before the range check.
  EXPECT_TT_ERROR(shard.token(INT64_MIN), "a.bin", "token index -9223372036854775808");
  EXPECT_TT_ERROR(shard.token(INT64_MAX), "a.bin", "token index 9223372036854775807");
}

TEST(Ch08_Shards, Uint32ForLargeVocabularies) {
  TempDir dir;
  const std::vector<int32_t> tokens = {0, 65536, 128255, 7};
  write_shard(dir.file("b.bin"), tokens, 128256);
  const std::string data = read_bytes(dir.file("b.bin"));
  EXPECT_EQ(header_int(data, 0), 20240801);
  EXPECT_EQ(header_int(data, 1), 7);
  const TokenShard shard(dir.file("b.bin"), 128256);
  EXPECT_EQ(shard.token_size(), 4);
  for (std::size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(shard.token(i), tokens[i]);
  // An empty shard is valid.
  write_shard(dir.file("empty.bin"), {}, 100);
  EXPECT_EQ(TokenShard(dir.file("empty.bin"), 100).num_tokens(), 0);
}

TEST(Ch08_Shards, RejectsBadShards) {
  TempDir dir;
  const std::string path = dir.file("s.bin");
  write_shard(path, std::vector<int32_t>{1, 2, 3, 4}, 1000);
  const std::string good = read_bytes(path);
  auto open_patched = [&](const std::function<void(std::string&)>& patch, int64_t vocab = 1000) {
    std::string data = good;
    patch(data);
    write_bytes(path, data);
    return TokenShard(path, vocab);
  };
  EXPECT_TT_ERROR(TokenShard(dir.file("none.bin"), 10), "none.bin", "cannot open");
  // A directory where the file is expected: said so (mmap's "No such device" before).
  std::filesystem::create_directories(dir.file("dir.bin"));
  EXPECT_TT_ERROR(TokenShard(dir.file("dir.bin"), 10),
                  "token shard '" + dir.file("dir.bin") + "' is a directory");
  EXPECT_TT_ERROR(open_patched([](std::string& d) { d.clear(); }), "s.bin", "truncated header",
                  "0 bytes");
  EXPECT_TT_ERROR(open_patched([](std::string& d) { d.resize(1000); }), "s.bin", "truncated header",
                  "1000 bytes");
  EXPECT_TT_ERROR(open_patched([](std::string& d) { test08::put_le32(d, 0, 12345); }), "s.bin",
                  "wrong magic 12345", "offset 0");
  EXPECT_TT_ERROR(open_patched([](std::string& d) { test08::put_le32(d, 4, 2); }), "s.bin",
                  "unsupported version 2", "offset 4");
  EXPECT_TT_ERROR(open_patched([](std::string& d) { d.pop_back(); }), "s.bin", "4 tokens",
                  "1031 bytes", "truncated");
  EXPECT_TT_ERROR(open_patched([](std::string& d) { d += "xx"; }), "s.bin", "4 tokens",
                  "1034 bytes");
  EXPECT_TT_ERROR(open_patched([](std::string& d) { test08::put_le32(d, 8, 5); }), "s.bin",
                  "offset 8", "5 tokens");
  EXPECT_TT_ERROR(open_patched([](std::string& d) { test08::put_le32(d, 8, -1); }), "s.bin",
                  "negative token count");
  // Token values are checked when read: token 3 (value 4) at byte offset 1024 + 2*3.
  const TokenShard small_vocab = open_patched([](std::string&) {}, 4);
  EXPECT_EQ(small_vocab.token(2), 3);
  EXPECT_TT_ERROR(small_vocab.token(3), "s.bin", "token 4 at offset 1030",
                  ">= the vocabulary size 4");
  EXPECT_TT_ERROR(small_vocab.validate_tokens(), "offset 1030");
  // The writer refuses tokens outside the vocabulary.
  EXPECT_TT_ERROR(write_shard(dir.file("w.bin"), std::vector<int32_t>{1, 10}, 10), "w.bin",
                  "token 10 at index 1");
  EXPECT_TT_ERROR(write_shard(dir.file("w.bin"), std::vector<int32_t>{-1}, 10), "w.bin");
  EXPECT_TT_ERROR(write_shard(dir.str() + "/no/such/dir/w.bin", std::vector<int32_t>{1}, 10),
                  "cannot open");
}

TEST(Ch08_Shards, MappedFileIsMovable) {
  TempDir dir;
  write_bytes(dir.file("m.txt"), "hello");
  MappedFile a(dir.file("m.txt"));
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a.data()[1], 'e');
  MappedFile b(std::move(a));
  EXPECT_EQ(b.size(), 5u);
  EXPECT_EQ(b.data()[4], 'o');
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  write_bytes(dir.file("n.txt"), "");
  b = MappedFile(dir.file("n.txt"));
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.path(), dir.file("n.txt"));
}

}  // namespace
}  // namespace tt
