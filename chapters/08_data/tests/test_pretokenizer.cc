// Chapter 08: GPT-2's pre-tokenization regex through PCRE2, including invalid UTF-8.
#include "ch08_test_util.h"
#include "tt/bpe.h"

namespace tt {
namespace {

using Pieces = std::vector<std::string_view>;

TEST(Ch08_Pretokenizer, Gpt2Pieces) {
  const Pretokenizer pre;
  EXPECT_EQ(pre.split("Hello world!"), (Pieces{"Hello", " world", "!"}));
  EXPECT_EQ(pre.split("I'm you'll it's"), (Pieces{"I", "'m", " you", "'ll", " it", "'s"}));
  EXPECT_EQ(pre.split("DON'T"), (Pieces{"DON", "'", "T"}));  // contractions are lowercase only
  EXPECT_EQ(pre.split("abc123 4.5"), (Pieces{"abc", "123", " 4", ".", "5"}));
  // \s+(?!\S): a run of spaces leaves its last space to the next word.
  EXPECT_EQ(pre.split("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pre.split("x\n\n  "), (Pieces{"x", "\n\n  "}));
  EXPECT_EQ(pre.split(" \tfoo"), (Pieces{" ", "\t", "foo"}));
  EXPECT_EQ(pre.split("caf\xc3\xa9 \xf0\x9f\x8d\x95!"),
            (Pieces{"caf\xc3\xa9", " \xf0\x9f\x8d\x95!"}));
  EXPECT_EQ(pre.split(""), Pieces{});
  EXPECT_EQ(pre.pattern(), std::string(kGpt2Pattern));
}

TEST(Ch08_Pretokenizer, InvalidUtf8BecomesItsOwnPiece) {
  const Pretokenizer pre;
  EXPECT_EQ(pre.split("ab\xff\xfe"
                      "cd"),
            (Pieces{"ab", "\xff\xfe", "cd"}));
  EXPECT_EQ(pre.split("\x80"), (Pieces{"\x80"}));
  EXPECT_EQ(pre.split("ok \xe2\x82"), (Pieces{"ok", " ", "\xe2\x82"}));
  // Any bytes: the pieces are non-empty and concatenate to the input.
  Generator gen(11);
  for (std::size_t n = 0; n < 500; n += 3) {
    const std::string s = test08::random_bytes(gen, n);
    std::string joined;
    for (std::string_view piece : pre.split(s)) {
      EXPECT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, s) << "length " << n;
  }
}

TEST(Ch08_Pretokenizer, Errors) {
  EXPECT_TT_ERROR(Pretokenizer("(unclosed"), "Pretokenizer", "invalid regex", "(unclosed");
  const Pretokenizer empty_match("a*");
  EXPECT_TT_ERROR(empty_match.split("bbb"), "matched the empty string");
  Pretokenizer moved = Pretokenizer("\\w+|\\W+");
  EXPECT_EQ(moved.split("hi there"), (Pieces{"hi", " ", "there"}));
}

}  // namespace
}  // namespace tt
