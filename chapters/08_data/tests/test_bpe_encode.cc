// Chapter 08, ch08.2 (bpe_merge_word, Tokenizer::encode with hand-made merges, round trips) and
// ch08.3 (GPT-2's byte-to-unicode table).
#include <set>

#include "ch08_test_util.h"
#include "tt/tokenizer.h"

namespace tt {
namespace {

std::vector<int32_t> bytes_of(std::string_view s) {
  return std::vector<int32_t>(reinterpret_cast<const uint8_t*>(s.data()),
                              reinterpret_cast<const uint8_t*>(s.data()) + s.size());
}

TEST(Ch08_2_MergeWord, LowestRankFirst) {
  // Rank order differs from position order: (b,c) has rank 0, so "abc" merges b+c first.
  const MergeRanks ranks = {{bpe_pair_key('b', 'c'), {0, 300}},
                            {bpe_pair_key('a', 'b'), {1, 301}},
                            {bpe_pair_key('a', 300), {2, 302}}};
  std::vector<int32_t> ids = bytes_of("abc");
  bpe_merge_word(ids, ranks);
  EXPECT_EQ(ids, std::vector<int32_t>{302});
  ids = bytes_of("abab");
  bpe_merge_word(ids, ranks);
  EXPECT_EQ(ids, (std::vector<int32_t>{301, 301}));  // every occurrence of the best pair
  ids = bytes_of("xyz");
  bpe_merge_word(ids, ranks);
  EXPECT_EQ(ids, bytes_of("xyz"));
  ids = {};
  bpe_merge_word(ids, ranks);
  EXPECT_TRUE(ids.empty());
  ids = bytes_of("a");
  bpe_merge_word(ids, ranks);
  EXPECT_EQ(ids, bytes_of("a"));
}

TEST(Ch08_2_MergeWord, RepeatedPairsMergeLeftToRight) {
  const MergeRanks ranks = {{bpe_pair_key('a', 'a'), {0, 256}}, {bpe_pair_key(256, 256), {1, 257}}};
  std::vector<int32_t> ids = bytes_of("aaaaa");
  bpe_merge_word(ids, ranks);
  EXPECT_EQ(ids, (std::vector<int32_t>{257, 'a'}));
}

// A small hand-made tokenizer: " t", "th", "he", "the", " the", "in", "ing".
Tokenizer small_tokenizer() {
  std::vector<BpeMerge> merges = {{'t', 'h', 256}, {'h', 'e', 257}, {256, 'e', 258},
                                  {' ', 258, 259}, {'i', 'n', 260}, {260, 'g', 261}};
  return Tokenizer(test08::identity_bytes(), merges, {{"<|endoftext|>", 262}});
}

TEST(Ch08_2_Encode, UsesTheMergesPerPretoken) {
  const Tokenizer tok = small_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 263);
  // "the" -> th + e (rank 0 before rank 1), " the" -> " " + "the" -> " the".
  EXPECT_EQ(tok.encode("the the"), (std::vector<int32_t>{258, 259}));
  EXPECT_EQ(tok.encode("thing"), (std::vector<int32_t>{256, 261}));
  EXPECT_EQ(tok.decode(tok.encode("the thing")), "the thing");
  EXPECT_EQ(tok.token_bytes(259), " the");
  // The special token's text is ordinary text for encode(), one id for encode_with_specials().
  const auto plain = tok.encode("a<|endoftext|>b");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 262), 0);
  EXPECT_EQ(tok.decode(plain), "a<|endoftext|>b");
  const auto special = tok.encode_with_specials("the<|endoftext|>the<|endoftext|>");
  EXPECT_EQ(special, (std::vector<int32_t>{258, 262, 258, 262}));
  EXPECT_EQ(tok.decode(special), "the<|endoftext|>the<|endoftext|>");
}

TEST(Ch08_2_Encode, RoundTripOnRandomBytes) {
  // Merges over every byte pair of a few frequent bytes, so that many merges apply.
  std::vector<BpeMerge> merges;
  const std::string common("etaoin \xc3\xa9\xff\x00", 11);  // includes a 0 byte
  int32_t next = 256;
  for (char a : common) {
    for (char b : common) {
      merges.push_back({static_cast<uint8_t>(a), static_cast<uint8_t>(b), next++});
    }
  }
  merges.push_back({256, 256, next++});
  const Tokenizer tok(test08::identity_bytes(), merges, {{"<|endoftext|>", next}});
  Generator gen(2024);
  for (std::size_t n = 0; n <= 300; n += (n < 20 ? 1 : 13)) {
    std::string s = test08::random_bytes(gen, n);
    // Mix in text and the common bytes so merges and regex classes are exercised.
    if (n % 2 == 0) s += "eat tea  \n\n oat 123 \xc3\xa9t\xc3\xa9";
    const auto ids = tok.encode(s);
    EXPECT_EQ(tok.decode(ids), s) << "length " << s.size();
  }
  EXPECT_TT_ERROR(tok.decode(std::vector<int32_t>{1, next + 1}), "Tokenizer::decode", "position 1");
  EXPECT_TT_ERROR(tok.decode(std::vector<int32_t>{-1}), "Tokenizer::decode");
  EXPECT_TT_ERROR(tok.special_id("<|im_start|>"), "<|im_start|>", "<|endoftext|>");
}

TEST(Ch08_3_BytesToUnicode, Gpt2Table) {
  const auto t = gpt2_bytes_to_unicode();
  EXPECT_EQ(t['!'], U'!');
  EXPECT_EQ(t['A'], U'A');
  EXPECT_EQ(t['~'], U'~');
  EXPECT_EQ(t[0xA1], U'\u00A1');
  EXPECT_EQ(t[0xFF], U'\u00FF');
  EXPECT_EQ(t[0], char32_t{256});       // first non-printable byte
  EXPECT_EQ(t[' '], char32_t{0x120});   // 'Ġ'
  EXPECT_EQ(t['\n'], char32_t{0x10A});  // 'Ċ'
  EXPECT_EQ(t[0x7F], char32_t{289});    // DEL follows the 33 bytes 0..32
  EXPECT_EQ(t[0xAD], char32_t{323});    // soft hyphen, the last one
  const std::set<char32_t> distinct(t.begin(), t.end());
  EXPECT_EQ(distinct.size(), 256u);
  EXPECT_EQ(*distinct.rbegin(), char32_t{323});
  // The form of tokens in encoder.json / vocab.bpe.
  EXPECT_EQ(gpt2_token_text(" the"), "\xc4\xa0the");  // "Ġthe"
  EXPECT_EQ(gpt2_token_text("\n"), "\xc4\x8a");       // "Ċ"
}

}  // namespace
}  // namespace tt
