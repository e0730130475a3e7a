// Chapter 08, ch08.1: learn_bpe_merges (hand-checked merges, tie rule, overlapping pairs, early
// stop, agreement with a naive full-recount trainer, order independence) and BpeTrainer.
#include <algorithm>
#include <map>

#include "ch08_test_util.h"
#include "tt/tokenizer.h"

namespace tt {
namespace {

BpeWord word(std::string_view bytes, int64_t count) {
  BpeWord w;
  for (unsigned char c : bytes) w.ids.push_back(c);
  w.count = count;
  return w;
}

// The textbook trainer: recount every pair before each merge. Slow, obviously correct.
std::vector<BpeMerge> naive_merges(std::vector<BpeWord> words, int32_t first_id, int64_t n) {
  std::vector<BpeMerge> merges;
  while (static_cast<int64_t>(merges.size()) < n) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;  // ordered: ties -> smallest pair
    for (const auto& w : words) {
      for (std::size_t i = 0; i + 1 < w.ids.size(); ++i)
        counts[{w.ids[i], w.ids[i + 1]}] += w.count;
    }
    std::pair<int32_t, int32_t> best{};
    int64_t best_count = 0;
    for (const auto& [pair, c] : counts) {
      if (c > best_count) {
        best = pair;
        best_count = c;
      }
    }
    if (best_count < 2) break;
    const BpeMerge m{best.first, best.second, first_id + static_cast<int32_t>(merges.size())};
    merges.push_back(m);
    for (auto& w : words) bpe_replace_pair(w.ids, m.left, m.right, m.id);
  }
  return merges;
}

TEST(Ch08_1_LearnMerges, HandExample) {
  // (a,b) occurs 3 + 2 = 5 times, (b,c) 3 + 1 = 4 times: merge (a,b) first. Then (ab,c) occurs
  // 3 times; afterwards only (b,c) once is left, which is not worth a merge.
  const std::vector<BpeWord> words = {word("abc", 3), word("ab", 2), word("bc", 1)};
  const auto merges = learn_bpe_merges(words, 256, 10);
  const std::vector<BpeMerge> expected = {{'a', 'b', 256}, {256, 'c', 257}};
  EXPECT_EQ(merges, expected);
}

TEST(Ch08_1_LearnMerges, TiesGoToTheSmallestPair) {
  const std::vector<BpeWord> words = {word("cd", 2), word("ab", 2), word("ba", 2)};
  const auto merges = learn_bpe_merges(words, 300, 3);
  const std::vector<BpeMerge> expected = {{'a', 'b', 300}, {'b', 'a', 301}, {'c', 'd', 302}};
  EXPECT_EQ(merges, expected);
}

TEST(Ch08_1_LearnMerges, OverlappingPairs) {
  // "xxxx": (x,x) counts 3; merging gives "XX" (not "XxX"), whose (X,X) occurs once only.
  const auto merges = learn_bpe_merges({word("xxxx", 1)}, 256, 5);
  ASSERT_EQ(merges.size(), 1u);
  EXPECT_EQ(merges[0], (BpeMerge{'x', 'x', 256}));
  // With 2 occurrences the second merge (X,X) is learned too.
  const auto more = learn_bpe_merges({word("xxxx", 2)}, 256, 5);
  const std::vector<BpeMerge> expected = {{'x', 'x', 256}, {256, 256, 257}};
  EXPECT_EQ(more, expected);
}

TEST(Ch08_1_LearnMerges, RespectsTheMergeCountAndEdgeCases) {
  const std::vector<BpeWord> words = {word("hello", 5), word("help", 3), word("yellow", 2)};
  EXPECT_TRUE(learn_bpe_merges(words, 256, 0).empty());
  EXPECT_EQ(learn_bpe_merges(words, 256, 2).size(), 2u);
  EXPECT_TRUE(learn_bpe_merges({}, 256, 10).empty());
  EXPECT_TRUE(learn_bpe_merges({word("a", 100), word("", 3)}, 256, 10).empty());
  EXPECT_TT_ERROR(learn_bpe_merges(words, 256, -1), "num_merges");
}

std::vector<BpeWord> random_words(uint64_t seed, int n) {
  Generator gen(seed);
  std::vector<BpeWord> words;
  for (int i = 0; i < n; ++i) {
    const std::size_t len = 1 + gen.next_u64() % 9;
    std::string s;
    for (std::size_t k = 0; k < len; ++k) s.push_back(static_cast<char>('a' + gen.next_u64() % 5));
    words.push_back(word(s, 1 + static_cast<int64_t>(gen.next_u64() % 20)));
  }
  return words;
}

TEST(Ch08_1_LearnMerges, AgreesWithFullRecount) {
  for (uint64_t seed : {1, 2, 3}) {
    const auto words = random_words(seed, 300);
    EXPECT_EQ(learn_bpe_merges(words, 256, 60), naive_merges(words, 256, 60)) << "seed " << seed;
  }
}

TEST(Ch08_1_LearnMerges, DeterministicInAnyWordOrder) {
  auto words = random_words(7, 400);
  const auto merges = learn_bpe_merges(words, 256, 80);
  EXPECT_EQ(learn_bpe_merges(words, 256, 80), merges);
  std::reverse(words.begin(), words.end());
  EXPECT_EQ(learn_bpe_merges(words, 256, 80), merges);
  int64_t calls = 0;
  learn_bpe_merges(words, 256, 80, [&](int64_t done, int64_t total) {
    ++calls;
    EXPECT_EQ(total, 80);
    EXPECT_EQ(done, calls);
  });
  EXPECT_EQ(calls, static_cast<int64_t>(merges.size()));
}

const char* kCorpus[] = {
    "The quick brown fox jumps over the lazy dog. The dog sleeps.\n",
    "A bird in the hand is worth two in the bush.\n\t\t-- Proverb\n",
    "It's the end of the world as we know it, and I feel fine.\n",
    "int main() { return 0; }  // the smallest program\n",
    "Caf\xc3\xa9 na\xc3\xafve \xf0\x9f\x8d\x95 1234567 the the the\n",
};

TEST(Ch08_1_BpeTrainer, DeterministicAndRoundTrips) {
  auto train = [] {
    BpeTrainer trainer;
    for (const char* doc : kCorpus) trainer.add_text(doc);
    return trainer.train(300);
  };
  const Tokenizer a = train();
  const Tokenizer b = train();
  EXPECT_EQ(a.merges(), b.merges());
  ASSERT_FALSE(a.merges().empty());
  EXPECT_EQ(a.vocab_size(), 256 + static_cast<int32_t>(a.merges().size()) + 1);
  EXPECT_EQ(a.eot_id(), a.vocab_size() - 1);
  EXPECT_EQ(a.token_bytes(a.merges()[0].id).size(), 2u);
  for (const char* doc : kCorpus) {
    const auto ids = a.encode(doc);
    EXPECT_LT(ids.size(), std::string_view(doc).size()) << doc;  // merges compress
    EXPECT_EQ(a.decode(ids), doc);
  }
  // Random bytes (mostly invalid UTF-8) round-trip through the trained tokenizer.
  Generator gen(99);
  for (std::size_t n = 0; n < 200; n += 7) {
    const std::string s = test08::random_bytes(gen, n);
    EXPECT_EQ(a.decode(a.encode(s)), s) << "length " << n;
  }
}

TEST(Ch08_1_BpeTrainer, StopsWhenTheCorpusRunsOut) {
  BpeTrainer trainer;
  trainer.add_text("abab abab");
  EXPECT_EQ(trainer.num_pretokens(), 2);
  EXPECT_EQ(trainer.num_words(), 2);  // "abab" and " abab"
  const Tokenizer tok = trainer.train(50000);
  EXPECT_LT(tok.vocab_size(), 300);
  EXPECT_EQ(tok.decode(tok.encode("abab abab")), "abab abab");
  EXPECT_TT_ERROR(trainer.train(256), "vocab_size", "257");
}

}  // namespace
}  // namespace tt
