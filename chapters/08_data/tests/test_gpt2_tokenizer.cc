// Chapter 08: GPT-2's vocabulary (encoder.json + vocab.bpe) gives the ids of the reference
// encoder (reference_data/ch08/gpt2_tokenizer_vectors.json, written by
// tools/gen_gpt2_token_vectors.js with npm gpt-3-encoder 1.1.4), and the loader's errors.
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ch08_test_util.h"
#include "tt/tokenizer.h"

namespace tt {
namespace {

using test08::TempDir;
using test08::write_bytes;

const Tokenizer& gpt2() {
  // GPT-2's vocabulary is committed (reference_data/gpt2_vocab/): a missing file fails.
  static const Tokenizer tok = Tokenizer::load_gpt2_dir();
  return tok;
}

TEST(Ch08_Gpt2Tokenizer, VocabDirIsTheCommittedCopyUnlessTheVariableSaysOtherwise) {
  const char* saved = std::getenv("TT_GPT2_VOCAB_DIR");
  const std::string before = saved != nullptr ? saved : "";
  ::unsetenv("TT_GPT2_VOCAB_DIR");
  const std::string committed = gpt2_vocab_dir();
  ::setenv("TT_GPT2_VOCAB_DIR", "/elsewhere/gpt2", 1);
  const std::string overridden = gpt2_vocab_dir();
  ::setenv("TT_GPT2_VOCAB_DIR", "", 1);
  const std::string empty_means_unset = gpt2_vocab_dir();
  if (saved != nullptr) {
    ::setenv("TT_GPT2_VOCAB_DIR", before.c_str(), 1);
  } else {
    ::unsetenv("TT_GPT2_VOCAB_DIR");
  }
  EXPECT_EQ(std::filesystem::path(committed),
            std::filesystem::path(TT_SOURCE_DIR) / "reference_data" / "gpt2_vocab");
  EXPECT_TRUE(std::filesystem::exists(committed + "/encoder.json")) << committed;
  EXPECT_TRUE(std::filesystem::exists(committed + "/vocab.bpe")) << committed;
  EXPECT_EQ(overridden, "/elsewhere/gpt2");
  EXPECT_EQ(empty_means_unset, committed);
}

TEST(Ch08_Gpt2Tokenizer, MatchesReferenceVectors) {
  const nlohmann::json ref = nlohmann::json::parse(
      test08::read_bytes(testing::reference_path("ch08/gpt2_tokenizer_vectors.json")));
  const Tokenizer& tok = gpt2();
  ASSERT_GE(ref["vectors"].size(), 30u);
  for (const auto& v : ref["vectors"]) {
    const std::string text = v["text"];
    const std::vector<int32_t> expected = v["ids"];
    EXPECT_EQ(tok.encode(text), expected) << v["what"] << ": " << text;
    EXPECT_EQ(tok.decode(expected), text) << v["what"];
  }
}

TEST(Ch08_Gpt2Tokenizer, VocabularyAndSpecialToken) {
  const Tokenizer& tok = gpt2();
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.merges().size(), 50000u);
  EXPECT_EQ(tok.eot_id(), 50256);
  EXPECT_EQ(tok.token_bytes(220), " ");   // "Ġ"
  EXPECT_EQ(tok.token_bytes(198), "\n");  // "Ċ"
  EXPECT_EQ(tok.byte_ids()['!'], 0);
  EXPECT_EQ(tok.encode_with_specials("Hello<|endoftext|>"), (std::vector<int32_t>{15496, 50256}));
  // Saved in our own format and loaded back: the same tokenizer.
  TempDir dir;
  tok.save(dir.file("gpt2.ttbpe"));
  const Tokenizer again = Tokenizer::load(dir.file("gpt2.ttbpe"));
  EXPECT_EQ(again.merges(), tok.merges());
  EXPECT_EQ(again.byte_ids(), tok.byte_ids());
  EXPECT_EQ(again.specials(), tok.specials());
  EXPECT_EQ(again.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
}

TEST(Ch08_Gpt2Tokenizer, RoundTripOnAnyBytes) {
  const Tokenizer& tok = gpt2();
  Generator gen(5);
  for (std::size_t n = 0; n <= 400; n += (n < 16 ? 1 : 37)) {
    const std::string s = test08::random_bytes(gen, n);
    EXPECT_EQ(tok.decode(tok.encode(s)), s) << "length " << n;
  }
  // Invalid UTF-8 next to text: a lone continuation byte, a truncated sequence, an overlong
  // encoding, a UTF-16 surrogate encoded in UTF-8, bytes 0xFE/0xFF.
  for (std::string s : {"ab\x80"
                        "cd",
                        "x\xe2\x82", "\xc0\xaf slash", "\xed\xa0\x80 surrogate", "\xfe\xff BOM-ish",
                        "caf\xc3", " \xff\xff\xff  \xf0\x9f\x8d"}) {
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
  }
}

// Minimal GPT-2-style files: the 256 byte tokens, one merge, an end-of-text token.
struct TinyGpt2Files {
  TempDir dir;
  std::string encoder = dir.file("encoder.json");
  std::string bpe = dir.file("vocab.bpe");
  nlohmann::json json;
  TinyGpt2Files() {
    for (int b = 0; b < 256; ++b) json[gpt2_token_text(std::string(1, static_cast<char>(b)))] = b;
    json["ab"] = 256;
    json["<|endoftext|>"] = 257;
    write();
    write_bytes(bpe, "#version: 0.2\na b\n");
  }
  void write() { write_bytes(encoder, json.dump()); }
};

TEST(Ch08_Gpt2Tokenizer, LoaderErrors) {
  TinyGpt2Files f;
  const Tokenizer ok = Tokenizer::load_gpt2(f.encoder, f.bpe);
  EXPECT_EQ(ok.vocab_size(), 258);
  EXPECT_EQ(ok.eot_id(), 257);
  EXPECT_EQ(ok.encode("abab"), (std::vector<int32_t>{256, 256}));

  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.dir.file("missing.json"), f.bpe), "missing.json",
                  "cannot open");
  write_bytes(f.bpe, "#version: 0.2\na b c\n");
  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.encoder, f.bpe), "vocab.bpe", "line 2", "'a b c'");
  write_bytes(f.bpe, "#version: 0.2\na q\n");  // "aq" is not in encoder.json
  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.encoder, f.bpe), "vocab.bpe", "line 2", "'aq'");
  write_bytes(f.bpe, "#version: 0.2\na b\na b\n");
  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.encoder, f.bpe), "duplicate merge");
  write_bytes(f.bpe, "#version: 0.2\na b\n");
  write_bytes(f.encoder, "{\"a\": 1,");
  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.encoder, f.bpe), "encoder.json", "invalid JSON");
  f.json["<|endoftext|>"] = 999;  // ids must be exactly 0..vocab_size-1
  f.write();
  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.encoder, f.bpe), "999", "out of range [0, 258)");
  // Found by fuzz_gpt2_vocab: a second string with the id of a byte was dropped silently.
  f.json["<|endoftext|>"] = 257;
  f.json["\u0301"] = 97;  // the id of "a"
  f.write();
  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.encoder, f.bpe), "encoder.json", "id 97 is given to both");
  f.json.erase("\u0301");
  f.json["<|endoftext|>"] = "x";
  f.write();
  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.encoder, f.bpe), "encoder.json", "not an integer");
  f.json.erase("<|endoftext|>");
  f.json.erase("!");
  f.write();
  EXPECT_TT_ERROR(Tokenizer::load_gpt2(f.encoder, f.bpe), "encoder.json", "byte 33");
}

}  // namespace
}  // namespace tt
