// Fuzzes BPE encoding and decoding of chapter 08 (tt::Tokenizer, tt::Pretokenizer) on arbitrary
// bytes: valid or invalid UTF-8, special-token texts, anything. Tokenizers: a small one trained
// on a fixed text (fuzz_util.h), its GPT-2-style twin (the same merges over GPT-2's byte order,
// loaded with Tokenizer::parse_gpt2 from the encoder.json and vocab.bpe written for it), and
// GPT-2's own vocabulary (reference_data/gpt2_vocab/, or $TT_GPT2_VOCAB_DIR: tt::gpt2_vocab_dir()).
//
// Properties, for every tokenizer and input x: the pre-tokens concatenate to x;
// decode(encode(x)) == x and decode(encode_with_specials(x)) == x; encode(x) holds no special
// id; and the twin's ids are exactly the trained tokenizer's ids with the bytes renumbered.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tt/tokenizer.h"

namespace {

using tt::fuzz::require;

struct Tokenizers {
  tt::Tokenizer trained = tt::fuzz::small_trained_tokenizer();
  tt::Tokenizer twin = load_twin(trained);
  tt::Tokenizer gpt2 = tt::Tokenizer::load_gpt2_dir();
  tt::Pretokenizer pretokenizer;

  static tt::Tokenizer load_twin(const tt::Tokenizer& trained) {
    const tt::Tokenizer expected = tt::fuzz::with_gpt2_byte_ids(trained);
    const tt::fuzz::Gpt2Files files = tt::fuzz::gpt2_files(expected);
    tt::Tokenizer twin = tt::Tokenizer::parse_gpt2(files.encoder_json, files.vocab_bpe);
    require(tt::fuzz::same_tokenizer(twin, expected), "the GPT-2-style twin did not load as built");
    return twin;
  }
};

void check(const tt::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.encode(text);
  require(tok.decode(ids) == text, "decode(encode(x)) != x");
  for (const tt::SpecialToken& sp : tok.specials()) {
    for (int32_t id : ids) require(id != sp.id, "encode(x) produced a special token");
  }
  require(tok.decode(tok.encode_with_specials(text)) == text,
          "decode(encode_with_specials(x)) != x");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizers toks;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  std::string joined;
  toks.pretokenizer.for_each(text, [&](std::string_view piece) {
    require(!piece.empty(), "an empty pre-token");
    joined += piece;
  });
  require(joined == text, "the pre-tokens do not concatenate to the input");

  check(toks.trained, text);
  check(toks.twin, text);
  check(toks.gpt2, text);

  const std::vector<int32_t> trained_ids = toks.trained.encode(text);
  std::vector<int32_t> renumbered = trained_ids;
  for (int32_t& id : renumbered) id = id < 256 ? toks.twin.byte_ids()[id] : id;
  require(toks.twin.encode(text) == renumbered, "the GPT-2-style twin encodes differently");
  return 0;
}
