/// @file bpe.h
/// @brief The algorithms of byte-level BPE: GPT-2's pre-tokenizer (a PCRE2 regex), the merge
/// loop that learns merges from word counts, the merge of one pre-token with the merge ranks,
/// and GPT-2's byte-to-unicode table. tt::Tokenizer (tokenizer.h) puts them together.
///
/// Token ids are int32_t. A merge \f$(a, b) \to c\f$ replaces every adjacent pair of tokens
/// \f$a, b\f$ by the new token \f$c\f$, whose bytes are bytes(a) followed by bytes(b). Its
/// rank is its position in the learned order: rank 0 was learned first and is applied first.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tt {

/// One learned merge: the adjacent tokens (left, right) become the token `id`.
struct BpeMerge {
  int32_t left = 0;   ///< id of the left token of the pair
  int32_t right = 0;  ///< id of the right token of the pair
  int32_t id = 0;     ///< id of the merged token
  /// Merges are equal when all three ids are.
  bool operator==(const BpeMerge&) const = default;
};

/// Key of a pair of token ids in hash maps: (left << 32) | right.
inline uint64_t bpe_pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

/// What encoding needs to know about a merge: its rank (priority; lower merges first) and the id
/// of the merged token.
struct MergeRank {
  int32_t rank = 0;  ///< position of the merge in the learned order
  int32_t id = 0;    ///< id of the merged token
};

/// Merge ranks keyed by bpe_pair_key(left, right).
using MergeRanks = std::unordered_map<uint64_t, MergeRank>;

/// A distinct pre-token of the training corpus as a sequence of token ids, with how often it
/// occurs. BPE training only ever looks at pairs inside one word.
struct BpeWord {
  std::vector<int32_t> ids;  ///< current tokens of the word (initially one per byte)
  int64_t count = 0;         ///< occurrences of the word in the corpus
};

/// Called during long work with (done, total) units of work.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

/// Replaces every occurrence of the adjacent pair (left, right) in `ids`, scanning left to
/// right without overlap, by `id` ("a a a" with the pair (a, a) gives "X a"). Returns how many
/// pairs were replaced. The one rewriting step shared by training and encoding.
int64_t bpe_replace_pair(std::vector<int32_t>& ids, int32_t left, int32_t right, int32_t id);

/// Learns up to `num_merges` merges from `words` (exercise ch08.1). Repeatedly:
/// count every adjacent pair, weighted by word count, \f$ n(a,b) = \sum_w \text{count}_w \cdot
/// \#\{i : w_i = a, w_{i+1} = b\} \f$ (overlapping occurrences such as (x,x) in "x x x" all
/// count); pick the pair with the highest count, **ties broken by the smallest (left, right)**
/// in lexicographic order; record the merge (left, right) -> first_new_id + k for the k-th
/// merge; replace its occurrences in every word left to right without overlap. Stops early
/// when no pair occurs at least twice. Deterministic: the same words (in any order) give the
/// same merges. `progress` (optional) is called with (merges done, num_merges).
std::vector<BpeMerge> learn_bpe_merges(std::vector<BpeWord> words, int32_t first_new_id,
                                       int64_t num_merges, const ProgressFn& progress = {});

/// Merges the tokens of one pre-token (exercise ch08.2), GPT-2's algorithm: while some adjacent
/// pair has a rank, take the pair with the lowest rank and replace all its occurrences, left to
/// right without overlap, by the merged id. `ids` holds the initial tokens (one per byte) and
/// is rewritten in place.
void bpe_merge_word(std::vector<int32_t>& ids, const MergeRanks& ranks);

/// GPT-2's byte-to-unicode table (exercise ch08.3): the code point that stands for byte b in
/// encoder.json and vocab.bpe. The 188 printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' stand for
/// themselves; the other 68 bytes, in increasing order, get the code points 256, 257, ... .
/// So every byte is a visible, non-space character and "Ġ" (U+0120) stands for ' ' (0x20).
std::array<char32_t, 256> gpt2_bytes_to_unicode();

/// How GPT-2's files write a token: its bytes through gpt2_bytes_to_unicode(), as UTF-8
/// (e.g. " the" -> "Ġthe"). The keys of encoder.json and the words of vocab.bpe.
std::string gpt2_token_text(std::string_view bytes);

/// GPT-2's pre-tokenization pattern: contractions, letters, numbers, other symbols (each with
/// an optional leading space), then whitespace.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Splits text into pre-tokens with a PCRE2 regex compiled in UTF + UCP mode (JIT when the
/// library supports it). Any bytes are accepted: with PCRE2_MATCH_INVALID_UTF an invalid UTF-8
/// sequence is never part of a match, and each maximal run of bytes between two matches (or
/// before the first / after the last) becomes a pre-token of its own. The pieces therefore
/// always concatenate to the input. Thread-safe (each call uses its own match data).
class Pretokenizer {
 public:
  /// Compiles `pattern`; throws tt::Error with PCRE2's message and offset when it is invalid.
  explicit Pretokenizer(std::string_view pattern = kGpt2Pattern);
  /// Frees the compiled pattern.
  ~Pretokenizer();
  /// Takes over the compiled pattern of another pre-tokenizer.
  Pretokenizer(Pretokenizer&&) noexcept;
  /// Replaces this pattern by the compiled pattern of another pre-tokenizer.
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  /// The pre-tokens of `text` (views into it), in order; they concatenate to `text`.
  std::vector<std::string_view> split(std::string_view text) const;
  /// Calls `fn` on each pre-token of `text` in order (no vector allocated).
  void for_each(std::string_view text, const std::function<void(std::string_view)>& fn) const;
  /// True when the pattern was JIT-compiled.
  bool jit() const;
  /// The pattern.
  const std::string& pattern() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tt
