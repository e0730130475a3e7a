// Helpers shared by the fuzz targets and by write_fuzz_seeds (which writes their seed corpora):
// the small objects the fuzzers parse into, built deterministically, and the inverse of
// Tokenizer::parse_gpt2.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tt/bpe.h"
#include "tt/generator.h"
#include "tt/layers.h"
#include "tt/optim.h"
#include "tt/tokenizer.h"

namespace tt::fuzz {

/// The fuzzer's input as a byte vector (the type the checkpoint and llm.c parsers read).
inline std::vector<std::byte> byte_vector(const uint8_t* data, std::size_t size) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  return std::vector<std::byte>(p, p + size);
}

/// Aborts (a finding for libFuzzer) with a message on stderr when `ok` is false.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what);
    std::abort();
  }
}

/// What fuzz_checkpoint loads into: a Linear(3, 2) with bias and an AdamW over it, whose state
/// holds all three dtypes (int64 step, float64 lr, float32 moments).
struct CheckpointTarget {
  Generator gen{7};
  nn::Linear model{3, 2, true, gen};
  optim::AdamW optimizer{model.parameters(), optim::AdamWOptions{}};
};

/// Text the small BPE tokenizer is trained on: words, numbers, contractions, runs of spaces
/// and symbols, multi-byte UTF-8 and the special token's text.
inline constexpr std::string_view kTrainingText =
    "The quick brown fox jumps over the lazy dog. The dog doesn't care; the fox'll be back!\n"
    "  Indented   text\twith\ttabs, 12345 67890 3.14159 and 2024-05-20.\n"
    "She said: \"we're here\", they've gone, I'm done, you'd know.\n"
    "==== ---- **** ____ ~~~~ .... !!!! ???? ////\n"
    "na\xc3\xafve caf\xc3\xa9 \xc3\xbc\x62\x65r \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
    "\xf0\x9f\x99\x82 \xf0\x9f\x99\x82 \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82\n"
    "the the the then there their these those <|endoftext|> the end\n";

/// A byte-level BPE tokenizer trained on kTrainingText (ids: bytes 0..255, merges, then
/// "<|endoftext|>").
inline Tokenizer small_trained_tokenizer() {
  BpeTrainer trainer;
  trainer.add_text(kTrainingText);
  return trainer.train(320);
}

/// GPT-2's id of each byte: the bytes ordered by their gpt2_bytes_to_unicode() code point
/// ('!' is 0, ..., byte 0 is 188), as in GPT-2's encoder.json.
inline std::array<int32_t, 256> gpt2_byte_ids() {
  const std::array<char32_t, 256> table = gpt2_bytes_to_unicode();
  std::array<int, 256> order{};
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return table[a] < table[b]; });
  std::array<int32_t, 256> ids{};
  for (int i = 0; i < 256; ++i) ids[order[i]] = i;
  return ids;
}

/// `tok` (whose byte b has id b, as a trained tokenizer's) with its bytes renumbered to
/// gpt2_byte_ids(); merges and special tokens keep their ids.
inline Tokenizer with_gpt2_byte_ids(const Tokenizer& tok) {
  const std::array<int32_t, 256> ids = gpt2_byte_ids();
  auto remap = [&](int32_t id) { return id < 256 ? ids[id] : id; };
  std::vector<BpeMerge> merges;
  for (const BpeMerge& m : tok.merges()) merges.push_back({remap(m.left), remap(m.right), m.id});
  return Tokenizer(ids, std::move(merges), tok.specials(), tok.pattern());
}

/// The contents of GPT-2's two vocabulary files.
struct Gpt2Files {
  std::string encoder_json;  ///< {token text: id}
  std::string vocab_bpe;     ///< "#version: 0.2", then one merge "left right" per line
};

/// encoder.json and vocab.bpe describing `tok` (the inverse of Tokenizer::parse_gpt2, for a
/// tokenizer whose token texts are distinct).
inline Gpt2Files gpt2_files(const Tokenizer& tok) {
  nlohmann::json encoder = nlohmann::json::object();
  auto text = [&](int32_t id) { return gpt2_token_text(tok.token_bytes(id)); };
  for (int32_t id : tok.byte_ids()) encoder[text(id)] = id;
  std::string bpe = "#version: 0.2\n";
  for (const BpeMerge& m : tok.merges()) {
    encoder[text(m.id)] = m.id;
    bpe += text(m.left) + " " + text(m.right) + "\n";
  }
  for (const SpecialToken& sp : tok.specials()) encoder[sp.text] = sp.id;
  return {encoder.dump(), bpe};
}

/// True when two tokenizers have the same byte ids, merges, special tokens and pattern.
inline bool same_tokenizer(const Tokenizer& a, const Tokenizer& b) {
  return a.byte_ids() == b.byte_ids() && a.merges() == b.merges() && a.specials() == b.specials() &&
         a.pattern() == b.pattern();
}

}  // namespace tt::fuzz
