// Fuzzes the GPT-2 vocabulary loader of chapter 08 (tt::Tokenizer::parse_gpt2, the code behind
// Tokenizer::load_gpt2).
//
// Input: the contents of encoder.json, a NUL byte, then the contents of vocab.bpe (no NUL:
// vocab.bpe is empty). JSON text never holds a raw NUL, so the split loses nothing.
//
// Properties: any pair of files either loads or throws tt::Error (never crash, leak, read out
// of bounds, or allocate in proportion to an id's value rather than to the input); what loads
// has one token per entry of encoder.json (nothing is dropped silently) and is described again
// by the encoder.json and vocab.bpe written from it (gpt2_files), which load to the same
// tokenizer; and it round-trips text: decode(encode(t)) == t for a fixed text and for the
// input's bytes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tt/error.h"
#include "tt/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tt::fuzz::require;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view encoder_json = input.substr(0, nul);
  const std::string_view vocab_bpe =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  std::optional<tt::Tokenizer> tok;
  try {
    tok.emplace(tt::Tokenizer::parse_gpt2(encoder_json, vocab_bpe));
  } catch (const tt::Error&) {
    return 0;  // rejected with a message: fine
  }
  // Nothing in encoder.json is dropped silently: each entry is one token.
  require(static_cast<std::size_t>(tok->vocab_size()) == nlohmann::json::parse(encoder_json).size(),
          "an entry of encoder.json is not a token of the loaded tokenizer");
  const tt::fuzz::Gpt2Files files = tt::fuzz::gpt2_files(*tok);
  const tt::Tokenizer again =
      tt::Tokenizer::parse_gpt2(files.encoder_json, files.vocab_bpe, "again.json", "again.bpe");
  require(tt::fuzz::same_tokenizer(*tok, again), "parse_gpt2(gpt2_files(tok)) != tok");
  for (const std::string_view text : {tt::fuzz::kTrainingText, input}) {
    const std::vector<int32_t> ids = tok->encode(text);
    require(tok->decode(ids) == text, "decode(encode(text)) != text");
  }
  return 0;
}
