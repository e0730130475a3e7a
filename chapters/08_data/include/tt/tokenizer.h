/// @file tokenizer.h
/// @brief tt::Tokenizer, a byte-level BPE tokenizer (GPT-2's design): train one on a corpus
/// with tt::BpeTrainer, or load GPT-2's own vocabulary; encode, decode, save, load.
///
/// A tokenizer is fully described by
///  - the id of each of the 256 bytes (identity for a trained tokenizer, a permutation for
///    GPT-2's),
///  - the merges in rank order, each (left, right) -> id,
///  - the special tokens (e.g. "<|endoftext|>"), which encode() never produces from text,
///  - the pre-tokenization regex.
///
/// The ids 0 .. vocab_size()-1 are each assigned exactly once (a byte, a merge or a special).
/// decode(encode(s)) == s for every byte string s, including invalid UTF-8.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tt/bpe.h"

namespace tt {

/// The directory holding GPT-2's encoder.json and vocab.bpe: $TT_GPT2_VOCAB_DIR when it is set
/// and not empty, else the copy committed in the repository, reference_data/gpt2_vocab/ (its
/// absolute path is compiled into this library when CMake configures the build, so a moved
/// source tree needs a re-configure or the variable).
std::string gpt2_vocab_dir();

/// A special token: a string encoded as one fixed id, never produced by ordinary text.
struct SpecialToken {
  std::string text;  ///< e.g. "<|endoftext|>"
  int32_t id = 0;    ///< its id
  /// Equal when text and id are.
  bool operator==(const SpecialToken&) const = default;
};

/// A byte-level BPE tokenizer.
class Tokenizer {
 public:
  /// GPT-2's document separator.
  static constexpr std::string_view kEndOfText = "<|endoftext|>";
  /// Magic bytes at the start of a saved tokenizer file.
  static constexpr std::string_view kFileMagic = "TTBPETOK";
  /// Version of the saved file format written by save().
  static constexpr uint32_t kFileVersion = 1;
  /// The most bytes all tokens may take together (64 MiB; GPT-2's take 0.3 MiB). A merge's
  /// token is its parts' bytes concatenated, so k merges (x, x), (xx, xx), ... describe a
  /// token of 2^k bytes: the constructor rejects that instead of allocating it.
  static constexpr int64_t kMaxVocabBytes = int64_t{1} << 26;

  /// Builds a tokenizer from its parts and checks them: ids in [0, vocab_size) with
  /// vocab_size = 256 + merges + specials, each id assigned once, no pair merged twice, every
  /// merge built from bytes or earlier merges, all tokens together at most kMaxVocabBytes
  /// bytes. Throws tt::Error naming the problem.
  Tokenizer(const std::array<int32_t, 256>& byte_ids, std::vector<BpeMerge> merges,
            std::vector<SpecialToken> specials, std::string_view pattern = kGpt2Pattern);

  /// Loads a file written by save(); throws tt::Error naming the file and the problem (wrong
  /// magic or version, truncated, trailing bytes, ids out of range, duplicate merges, ...).
  static Tokenizer load(const std::string& path);
  /// load() from the bytes of a saved tokenizer in memory; `source` names them in errors.
  static Tokenizer parse(std::string_view bytes, const std::string& source = "<memory>");
  /// Writes the tokenizer in the binary format described in chapter 08's README ("The saved
  /// tokenizer").
  void save(const std::string& path) const;
  /// The bytes save() writes.
  std::string serialize() const;
  /// Loads GPT-2's vocabulary: encoder.json (token string -> id, bytes written with GPT-2's
  /// byte-to-unicode table) and vocab.bpe ("#version" line, then one merge "a b" per line, in
  /// rank order). Entries of encoder.json that are neither bytes nor merges become special
  /// tokens (GPT-2: "<|endoftext|>" = 50256). Throws tt::Error naming the file and the problem.
  static Tokenizer load_gpt2(const std::string& encoder_json_path,
                             const std::string& vocab_bpe_path);
  /// load_gpt2() of `dir`/encoder.json and `dir`/vocab.bpe; by default GPT-2's own vocabulary
  /// (gpt2_vocab_dir()).
  static Tokenizer load_gpt2_dir(const std::string& dir = gpt2_vocab_dir());
  /// load_gpt2() from the contents of encoder.json and vocab.bpe in memory; the sources name
  /// them in errors.
  static Tokenizer parse_gpt2(std::string_view encoder_json, std::string_view vocab_bpe,
                              const std::string& encoder_json_source = "encoder.json",
                              const std::string& vocab_bpe_source = "vocab.bpe");

  /// Token ids of ordinary text: special-token strings in `text` are encoded as plain text.
  std::vector<int32_t> encode(std::string_view text) const;
  /// Appends the ids of ordinary text to `out` (as encode()).
  void encode_append(std::string_view text, std::vector<int32_t>& out) const;
  /// Token ids of text in which occurrences of the special tokens' strings are encoded as the
  /// special ids (the leftmost, then longest, occurrence wins).
  std::vector<int32_t> encode_with_specials(std::string_view text) const;
  /// The bytes of the tokens, concatenated; throws tt::Error on an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;
  /// The bytes of one token; throws tt::Error on an id outside the vocabulary.
  const std::string& token_bytes(int32_t id) const;

  /// Number of ids (bytes + merges + specials).
  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.size()); }
  /// The id of a special token; throws tt::Error listing the special tokens when absent.
  int32_t special_id(std::string_view text) const;
  /// The id of "<|endoftext|>" (special_id(kEndOfText)).
  int32_t eot_id() const { return special_id(kEndOfText); }
  /// The id of each byte value.
  const std::array<int32_t, 256>& byte_ids() const { return byte_ids_; }
  /// The merges in rank order.
  const std::vector<BpeMerge>& merges() const { return merges_; }
  /// The special tokens.
  const std::vector<SpecialToken>& specials() const { return specials_; }
  /// The pre-tokenization regex.
  const std::string& pattern() const { return pretokenizer_.pattern(); }

 private:
  struct Unchecked {};
  Tokenizer(Unchecked, const std::array<int32_t, 256>& byte_ids, std::vector<BpeMerge> merges,
            std::vector<SpecialToken> specials, std::string_view pattern, const std::string& where);

  std::array<int32_t, 256> byte_ids_{};
  std::vector<BpeMerge> merges_;
  std::vector<SpecialToken> specials_;
  std::vector<std::string> vocab_;  // id -> bytes
  MergeRanks ranks_;
  Pretokenizer pretokenizer_;
};

/// Trains a byte-level BPE tokenizer: feed documents with add_text(), then train().
/// Memory is proportional to the number of distinct pre-tokens, not to the corpus size.
class BpeTrainer {
 public:
  /// A trainer that pre-tokenizes with `pattern`.
  explicit BpeTrainer(std::string_view pattern = kGpt2Pattern);
  /// Pre-tokenizes one document and counts its pre-tokens. Pieces never cross documents.
  void add_text(std::string_view text);
  /// Number of distinct pre-tokens seen so far.
  int64_t num_words() const { return static_cast<int64_t>(counts_.size()); }
  /// Total number of pre-tokens seen so far.
  int64_t num_pretokens() const { return num_pretokens_; }
  /// Learns a tokenizer with `vocab_size` ids: the 256 bytes (id = byte value), then
  /// vocab_size - 257 merges (ids 256, 257, ...), then "<|endoftext|>" as the last id. When
  /// the corpus runs out of pairs that occur twice, fewer merges are learned and the
  /// vocabulary is smaller. Throws tt::Error when vocab_size < 257. Deterministic.
  Tokenizer train(int32_t vocab_size, const ProgressFn& progress = {}) const;

 private:
  Pretokenizer pretokenizer_;
  std::unordered_map<std::string, int64_t> counts_;
  int64_t num_pretokens_ = 0;
};

}  // namespace tt
