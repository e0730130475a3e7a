// Fuzzes the saved-tokenizer loader of chapter 08 (tt::Tokenizer::parse, the code behind
// Tokenizer::load).
//
// Properties: any bytes either load or throw tt::Error (never crash, leak, read out of bounds
// or allocate more than the file describes); what loads serializes back to exactly the input
// (the format has no slack: every byte is a field and trailing bytes are rejected) and is a
// working tokenizer: decode(encode(t)) == t for a fixed text and for the input's own bytes
// (whatever its pre-tokenization pattern), and decode(encode_with_specials(t)) == t.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tt/error.h"
#include "tt/tokenizer.h"

namespace {

using tt::fuzz::require;

/// At most this many input bytes are encoded (a hostile pattern may be slow on long texts).
constexpr std::size_t kMaxTextBytes = 512;

void check_round_trip(const tt::Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids, with_specials;
  try {
    ids = tok.encode(text);
    with_specials = tok.encode_with_specials(text);
  } catch (const tt::Error&) {
    // A pattern from the file may exceed PCRE2's match limits or match the empty string:
    // encode reports that with tt::Error. decode below has no excuse to throw.
    return;
  }
  require(tok.decode(ids) == text, "decode(encode(text)) != text");
  require(tok.decode(with_specials) == text, "decode(encode_with_specials(text)) != text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::optional<tt::Tokenizer> tok;
  try {
    tok.emplace(tt::Tokenizer::parse(bytes, "fuzz"));
  } catch (const tt::Error&) {
    return 0;  // rejected with a message: fine
  }
  require(tok->serialize() == bytes, "serialize(parse(bytes)) != bytes");
  check_round_trip(*tok, tt::fuzz::kTrainingText);
  check_round_trip(*tok, bytes.substr(0, kMaxTextBytes));
  return 0;
}
