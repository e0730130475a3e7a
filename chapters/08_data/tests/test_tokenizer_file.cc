// Chapter 08: the saved tokenizer format (round trip, every rejection) and the checks of the
// Tokenizer constructor.
#include "ch08_test_util.h"
#include "tt/tokenizer.h"

namespace tt {
namespace {

using test08::read_bytes;
using test08::TempDir;
using test08::write_bytes;

// 256 bytes + 3 merges + 2 specials = 261 ids.
Tokenizer sample() {
  return Tokenizer(test08::identity_bytes(), {{'a', 'b', 256}, {256, 'c', 257}, {' ', 257, 258}},
                   {{"<|endoftext|>", 259}, {"<|pad|>", 260}});
}

// Offsets of the fields of a saved file (see chapters/08_data/README.md, "The saved tokenizer").
struct Layout {
  std::size_t pattern_len = 8 + 4;
  std::size_t pattern = pattern_len + 4;
  std::size_t num_merges, num_specials, byte_ids, merges, specials;
  explicit Layout(std::size_t pattern_size) {
    num_merges = pattern + pattern_size;
    num_specials = num_merges + 4;
    byte_ids = num_specials + 4;
    merges = byte_ids + 4 * 256;
    specials = merges + 3 * 12;
  }
};

TEST(Ch08_TokenizerFile, SaveLoadRoundTrip) {
  TempDir dir;
  const Tokenizer tok = sample();
  tok.save(dir.file("tok.ttbpe"));
  const Tokenizer back = Tokenizer::load(dir.file("tok.ttbpe"));
  EXPECT_EQ(back.byte_ids(), tok.byte_ids());
  EXPECT_EQ(back.merges(), tok.merges());
  EXPECT_EQ(back.specials(), tok.specials());
  EXPECT_EQ(back.pattern(), tok.pattern());
  EXPECT_EQ(back.vocab_size(), 261);
  EXPECT_EQ(back.special_id("<|pad|>"), 260);
  EXPECT_EQ(back.token_bytes(258), " abc");
  const std::string data = read_bytes(dir.file("tok.ttbpe"));
  EXPECT_EQ(data.substr(0, 8), "TTBPETOK");
  EXPECT_EQ(data.size(), Layout(tok.pattern().size()).specials + 2 * 8 + 13 + 7);
}

TEST(Ch08_TokenizerFile, RejectsBadFiles) {
  TempDir dir;
  const std::string path = dir.file("tok.ttbpe");
  sample().save(path);
  const std::string good = read_bytes(path);
  const Layout at(sample().pattern().size());
  auto load_patched = [&](const std::function<void(std::string&)>& patch) {
    std::string data = good;
    patch(data);
    write_bytes(path, data);
    return Tokenizer::load(path);
  };

  EXPECT_TT_ERROR(Tokenizer::load(dir.file("absent.ttbpe")), "absent.ttbpe", "cannot open");
  // A directory where the file is expected: said so (it read as an empty, truncated file).
  std::filesystem::create_directories(dir.file("tok_dir"));
  EXPECT_TT_ERROR(Tokenizer::load(dir.file("tok_dir")),
                  "tokenizer '" + dir.file("tok_dir") + "' is a directory");
  EXPECT_TT_ERROR(load_patched([](std::string& d) { d[0] = 'X'; }), "tok.ttbpe", "wrong magic");
  EXPECT_TT_ERROR(load_patched([](std::string& d) { test08::put_le32(d, 8, 2); }), "tok.ttbpe",
                  "unsupported version 2");
  EXPECT_TT_ERROR(load_patched([](std::string& d) { d += "junk"; }), "tok.ttbpe",
                  "4 unexpected trailing bytes");
  // A merge id out of range, a duplicate pair, an id used twice, a merge of an unknown token.
  EXPECT_TT_ERROR(load_patched([&](std::string& d) { test08::put_le32(d, at.merges + 8, 5000); }),
                  "tok.ttbpe", "merge 0", "5000", "out of range [0, 261)");
  EXPECT_TT_ERROR(load_patched([&](std::string& d) {
                    test08::put_le32(d, at.merges + 12, 'a');
                    test08::put_le32(d, at.merges + 16, 'b');
                  }),
                  "tok.ttbpe", "duplicate merge (97, 98) at ranks 0 and 1");
  EXPECT_TT_ERROR(
      load_patched([&](std::string& d) { test08::put_le32(d, at.merges + 12 + 8, 256); }),
      "tok.ttbpe", "id 256 is assigned twice");
  EXPECT_TT_ERROR(load_patched([&](std::string& d) { test08::put_le32(d, at.merges, 258); }),
                  "tok.ttbpe", "merge 0", "not a byte or an earlier merge");
  EXPECT_TT_ERROR(load_patched([&](std::string& d) { test08::put_le32(d, at.byte_ids + 4, 0); }),
                  "tok.ttbpe", "id 0 is assigned twice");
  EXPECT_TT_ERROR(load_patched([&](std::string& d) { test08::put_le32(d, at.specials, -3); }),
                  "tok.ttbpe", "special token '<|endoftext|>'", "-3");
  EXPECT_TT_ERROR(
      load_patched([&](std::string& d) { test08::put_le32(d, at.num_merges, 1 << 30); }),
      "tok.ttbpe", "truncated");
  EXPECT_TT_ERROR(load_patched([&](std::string& d) { test08::put_le32(d, at.pattern_len, 3); }),
                  "tok.ttbpe");
  // Proper prefixes of the file are rejected as truncated: every length through the header,
  // then lengths that cut every merge and special token somewhere, and the last byte.
  std::vector<std::size_t> lengths;
  for (std::size_t len = 0; len < good.size(); len += (len < at.byte_ids + 8 ? 1 : 5)) {
    lengths.push_back(len);
  }
  lengths.push_back(good.size() - 1);
  for (std::size_t len : lengths) {
    write_bytes(path, good.substr(0, len));
    EXPECT_TT_ERROR(Tokenizer::load(path), "tok.ttbpe", "truncated") << "prefix of " << len;
  }
}

TEST(Ch08_TokenizerFile, RejectsMergeChainsDescribingHugeTokens) {
  // Found while writing fuzz_tokenizer_file: merge k of (a, a), (t0, t0), (t1, t1), ... makes
  // a token of 2^(k+1) bytes, so a 1.5 KB file described a 4 GiB token and loading allocated it.
  std::vector<BpeMerge> chain = {{'a', 'a', 256}};
  for (int32_t k = 1; k < 32; ++k) chain.push_back({255 + k, 255 + k, 256 + k});
  // 256 + 2 + 4 + ... + 2^25 bytes exceed 64 MiB at merge 24 (a token of 2^25 bytes).
  EXPECT_TT_ERROR(Tokenizer(test08::identity_bytes(), chain, {}), "merge 24 (279, 279)",
                  "67108864 bytes", "kMaxVocabBytes");
  // The same through a saved file: the bytes-only file with the chain appended.
  std::string file = Tokenizer(test08::identity_bytes(), {}, {}).serialize();
  const Layout at(std::string(kGpt2Pattern).size());
  test08::put_le32(file, at.num_merges, static_cast<int32_t>(chain.size()));
  for (const BpeMerge& m : chain) {
    for (int32_t v : {m.left, m.right, m.id}) {
      file += std::string(4, '\0');
      test08::put_le32(file, file.size() - 4, v);
    }
  }
  EXPECT_TT_ERROR(Tokenizer::parse(file, "chain.ttbpe"), "chain.ttbpe", "merge 24",
                  "kMaxVocabBytes");
  // A chain below the limit loads.
  chain.resize(20);
  EXPECT_EQ(Tokenizer(test08::identity_bytes(), chain, {}).token_bytes(275).size(), 1u << 20);
}

TEST(Ch08_TokenizerFile, ParseAndSerializeAreLoadAndSaveInMemory) {
  TempDir dir;
  const Tokenizer tok = sample();
  tok.save(dir.file("tok.ttbpe"));
  EXPECT_EQ(tok.serialize(), read_bytes(dir.file("tok.ttbpe")));
  const Tokenizer back = Tokenizer::parse(tok.serialize(), "mem");
  EXPECT_EQ(back.merges(), tok.merges());
  EXPECT_EQ(back.specials(), tok.specials());
  EXPECT_TT_ERROR(Tokenizer::parse("TTBPETOK", "mem"), "Tokenizer::parse: 'mem'", "truncated");
}

TEST(Ch08_TokenizerFile, ConstructorChecks) {
  const auto bytes = test08::identity_bytes();
  EXPECT_TT_ERROR(Tokenizer(bytes, {{'a', 'b', 256}, {'a', 'b', 257}}, {}), "duplicate merge");
  EXPECT_TT_ERROR(Tokenizer(bytes, {{'a', 'b', 300}}, {}), "out of range [0, 257)");
  EXPECT_TT_ERROR(Tokenizer(bytes, {{'a', 999, 256}}, {}), "uses id 999");
  EXPECT_TT_ERROR(Tokenizer(bytes, {}, {{"", 256}}), "empty text");
  EXPECT_TT_ERROR(Tokenizer(bytes, {}, {{"<|x|>", 256}, {"<|x|>", 257}}), "listed twice");
  auto swapped = bytes;
  swapped[1] = 0;
  EXPECT_TT_ERROR(Tokenizer(swapped, {}, {{"<|endoftext|>", 256}}), "id 0 is assigned twice",
                  "byte 0", "byte 1");
  EXPECT_TT_ERROR(Tokenizer(bytes, {}, {}, "(bad"), "Tokenizer", "invalid regex");
  EXPECT_TT_ERROR(sample().token_bytes(261), "Tokenizer::token_bytes", "261");
}

}  // namespace
}  // namespace tt
