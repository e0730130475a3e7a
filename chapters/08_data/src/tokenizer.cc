// tt::Tokenizer: validation of the parts, encode/decode, the saved file format, GPT-2's
// vocabulary files, and tt::BpeTrainer.
#include "tt/tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "tt/error.h"
#include "tt/file.h"

namespace tt {
namespace {

// Little-endian fields of the saved format (explicit byte order: files move between machines).
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_i32(std::string& out, int32_t v) {
  put_u32(out, static_cast<uint32_t>(v));
}

// Reads the fields of a saved tokenizer in order; every failure names the file and offset.
class FieldReader {
 public:
  FieldReader(std::string_view data, std::string where) : data_(data), where_(std::move(where)) {}
  void need(std::size_t n, const char* what) const {
    TT_CHECK(n <= data_.size() - pos_, where_, ": truncated file: ", what, " needs ", n,
             " bytes at offset ", pos_, " but the file has ", data_.size(), " bytes");
  }
  uint32_t u32(const char* what) {
    need(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return v;
  }
  int32_t i32(const char* what) { return static_cast<int32_t>(u32(what)); }
  std::string bytes(std::size_t n, const char* what) {
    need(n, what);
    std::string s(data_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::size_t pos() const { return pos_; }
  std::size_t size() const { return data_.size(); }

 private:
  std::string_view data_;
  std::string where_;
  std::size_t pos_ = 0;
};

Pretokenizer make_pretokenizer(std::string_view pattern, const std::string& where) {
  try {
    return Pretokenizer(pattern);
  } catch (const Error& e) {
    TT_THROW(where, ": ", e.what());
  }
}

}  // namespace

// ----- construction and validation ----------------------------------------------------------

Tokenizer::Tokenizer(const std::array<int32_t, 256>& byte_ids, std::vector<BpeMerge> merges,
                     std::vector<SpecialToken> specials, std::string_view pattern)
    : Tokenizer(Unchecked{}, byte_ids, std::move(merges), std::move(specials), pattern,
                "Tokenizer") {}

Tokenizer::Tokenizer(Unchecked, const std::array<int32_t, 256>& byte_ids,
                     std::vector<BpeMerge> merges, std::vector<SpecialToken> specials,
                     std::string_view pattern, const std::string& where)
    : byte_ids_(byte_ids),
      merges_(std::move(merges)),
      specials_(std::move(specials)),
      pretokenizer_(make_pretokenizer(pattern, where)) {
  const int64_t vocab =
      256 + static_cast<int64_t>(merges_.size()) + static_cast<int64_t>(specials_.size());
  TT_CHECK(vocab <= std::numeric_limits<int32_t>::max(), where, ": vocabulary of ", vocab,
           " ids does not fit int32");
  // Who owns each id, for the "assigned twice" message.
  std::vector<std::string> owner(static_cast<std::size_t>(vocab));
  auto assign = [&](int32_t id, const std::string& what) {
    TT_CHECK(id >= 0 && id < vocab, where, ": ", what, " has id ", id, ", out of range [0, ", vocab,
             ") (256 bytes + ", merges_.size(), " merges + ", specials_.size(), " special tokens)");
    TT_CHECK(owner[id].empty(), where, ": id ", id, " is assigned twice: to ", owner[id],
             " and to ", what);
    owner[id] = what;
  };
  vocab_.assign(static_cast<std::size_t>(vocab), std::string());
  // Bytes of all tokens so far, checked before a token is allocated: a chain of merges
  // (x, x), (xx, xx), ... doubles a token's length with every merge.
  int64_t vocab_bytes = 256;
  auto add_bytes = [&](std::size_t n, const std::string& what) {
    vocab_bytes += static_cast<int64_t>(n);
    TT_CHECK(vocab_bytes <= kMaxVocabBytes, where, ": ", what, " makes the tokens take more than ",
             kMaxVocabBytes, " bytes together (Tokenizer::kMaxVocabBytes)");
  };
  for (int b = 0; b < 256; ++b) {
    assign(byte_ids_[b], detail::str("byte ", b));
    vocab_[byte_ids_[b]] = std::string(1, static_cast<char>(b));
  }
  ranks_.reserve(merges_.size());
  for (std::size_t k = 0; k < merges_.size(); ++k) {
    const BpeMerge& m = merges_[k];
    const std::string what = detail::str("merge ", k, " (", m.left, ", ", m.right, ")");
    for (int32_t part : {m.left, m.right}) {
      // A merge may only combine tokens that exist before it: bytes or earlier merges.
      TT_CHECK(part >= 0 && part < vocab && !owner[part].empty(), where, ": ", what, " uses id ",
               part, ", which is not a byte or an earlier merge");
    }
    const auto [it, inserted] =
        ranks_.emplace(bpe_pair_key(m.left, m.right), MergeRank{static_cast<int32_t>(k), m.id});
    TT_CHECK(inserted, where, ": duplicate merge (", m.left, ", ", m.right, ") at ranks ",
             it->second.rank, " and ", k);
    assign(m.id, what);
    add_bytes(vocab_[m.left].size() + vocab_[m.right].size(), what);
    vocab_[m.id] = vocab_[m.left] + vocab_[m.right];
  }
  std::unordered_set<std::string_view> special_texts;
  for (std::size_t s = 0; s < specials_.size(); ++s) {
    const SpecialToken& sp = specials_[s];
    TT_CHECK(!sp.text.empty(), where, ": special token ", s, " has an empty text");
    TT_CHECK(special_texts.insert(sp.text).second, where, ": special token '", sp.text,
             "' is listed twice");
    const std::string what = detail::str("special token '", sp.text, "'");
    assign(sp.id, what);
    add_bytes(sp.text.size(), what);
    vocab_[sp.id] = sp.text;
  }
}

// ----- encode / decode ----------------------------------------------------------------------

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<int32_t> word;
  pretokenizer_.for_each(text, [&](std::string_view piece) {
    word.clear();
    for (unsigned char c : piece) word.push_back(byte_ids_[c]);
    bpe_merge_word(word, ranks_);
    out.insert(out.end(), word.begin(), word.end());
  });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  encode_append(text, out);
  return out;
}

std::vector<int32_t> Tokenizer::encode_with_specials(std::string_view text) const {
  std::vector<int32_t> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t best_at = std::string_view::npos;
    const SpecialToken* best = nullptr;
    for (const SpecialToken& sp : specials_) {
      const std::size_t at = text.find(sp.text, pos);
      if (at == std::string_view::npos) continue;
      if (best == nullptr || at < best_at ||
          (at == best_at && sp.text.size() > best->text.size())) {
        best = &sp;
        best_at = at;
      }
    }
    if (best == nullptr) break;
    encode_append(text.substr(pos, best_at - pos), out);
    out.push_back(best->id);
    pos = best_at + best->text.size();
  }
  encode_append(text.substr(pos), out);
  return out;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  TT_CHECK(id >= 0 && id < vocab_size(), "Tokenizer::token_bytes: id ", id,
           " is outside the vocabulary [0, ", vocab_size(), ")");
  return vocab_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    TT_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), "Tokenizer::decode: id ", ids[i],
             " at position ", i, " is outside the vocabulary [0, ", vocab_size(), ")");
    out += vocab_[ids[i]];
  }
  return out;
}

int32_t Tokenizer::special_id(std::string_view text) const {
  std::string known;
  for (const SpecialToken& sp : specials_) {
    if (sp.text == text) return sp.id;
    known += (known.empty() ? "'" : ", '") + sp.text + "'";
  }
  TT_THROW("Tokenizer::special_id: no special token '", text,
           "' (special tokens: ", known.empty() ? "none" : known, ")");
}

// ----- saved format -------------------------------------------------------------------------

std::string Tokenizer::serialize() const {
  std::string out(kFileMagic);
  put_u32(out, kFileVersion);
  put_u32(out, static_cast<uint32_t>(pattern().size()));
  out += pattern();
  put_u32(out, static_cast<uint32_t>(merges_.size()));
  put_u32(out, static_cast<uint32_t>(specials_.size()));
  for (int32_t id : byte_ids_) put_i32(out, id);
  for (const BpeMerge& m : merges_) {
    put_i32(out, m.left);
    put_i32(out, m.right);
    put_i32(out, m.id);
  }
  for (const SpecialToken& sp : specials_) {
    put_i32(out, sp.id);
    put_u32(out, static_cast<uint32_t>(sp.text.size()));
    out += sp.text;
  }
  return out;
}

void Tokenizer::save(const std::string& path) const {
  const std::string out = serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TT_CHECK(f.good(), "Tokenizer::save: cannot open '", path, "' for writing");
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  f.close();
  TT_CHECK(!f.fail(), "Tokenizer::save: error while writing '", path, "'");
}

Tokenizer Tokenizer::load(const std::string& path) {
  return parse(read_whole_file(path, "tokenizer"), path);
}

Tokenizer Tokenizer::parse(std::string_view bytes, const std::string& source) {
  const std::string where = "Tokenizer::parse: '" + source + "'";
  FieldReader r(bytes, where);
  const std::string magic = r.bytes(kFileMagic.size(), "the magic");
  TT_CHECK(magic == kFileMagic, where, ": wrong magic (expected '", kFileMagic,
           "'): not a tokenizer saved by tt::Tokenizer::save");
  const uint32_t version = r.u32("the version");
  TT_CHECK(version == kFileVersion, where, ": unsupported version ", version,
           " (this build reads version ", kFileVersion, ")");
  const uint32_t pattern_len = r.u32("the pattern length");
  const std::string pattern = r.bytes(pattern_len, "the pattern");
  const uint32_t num_merges = r.u32("the merge count");
  const uint32_t num_specials = r.u32("the special token count");
  // Check the sizes before allocating anything proportional to them.
  r.need(4 * 256 + std::size_t{12} * num_merges, "the byte ids and merges");
  std::array<int32_t, 256> byte_ids{};
  for (auto& id : byte_ids) id = r.i32("a byte id");
  std::vector<BpeMerge> merges(num_merges);
  for (auto& m : merges) {
    m.left = r.i32("a merge");
    m.right = r.i32("a merge");
    m.id = r.i32("a merge");
  }
  std::vector<SpecialToken> specials;
  for (uint32_t s = 0; s < num_specials; ++s) {
    SpecialToken sp;
    sp.id = r.i32("a special token id");
    const uint32_t len = r.u32("a special token length");
    sp.text = r.bytes(len, "a special token text");
    specials.push_back(std::move(sp));
  }
  TT_CHECK(r.pos() == r.size(), where, ": ", r.size() - r.pos(),
           " unexpected trailing bytes at offset ", r.pos());
  return Tokenizer(Unchecked{}, byte_ids, std::move(merges), std::move(specials), pattern, where);
}

// ----- GPT-2's files ------------------------------------------------------------------------

std::string gpt2_token_text(std::string_view bytes) {
  const std::array<char32_t, 256> table = gpt2_bytes_to_unicode();
  std::string s;
  for (unsigned char b : bytes) {
    const char32_t cp = table[b];  // < 0x800: one or two UTF-8 bytes
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return s;
}

Tokenizer Tokenizer::load_gpt2(const std::string& encoder_json_path,
                               const std::string& vocab_bpe_path) {
  return parse_gpt2(read_whole_file(encoder_json_path, "GPT-2 encoder.json"),
                    read_whole_file(vocab_bpe_path, "GPT-2 vocab.bpe"), encoder_json_path,
                    vocab_bpe_path);
}

std::string gpt2_vocab_dir() {
  const char* env = std::getenv("TT_GPT2_VOCAB_DIR");
  if (env != nullptr && *env != '\0') return env;
  return TT_GPT2_VOCAB_DEFAULT_DIR;
}

Tokenizer Tokenizer::load_gpt2_dir(const std::string& dir) {
  return load_gpt2(dir + "/encoder.json", dir + "/vocab.bpe");
}

Tokenizer Tokenizer::parse_gpt2(std::string_view encoder_json, std::string_view vocab_bpe,
                                const std::string& encoder_json_source,
                                const std::string& vocab_bpe_source) {
  const std::string where_json = "Tokenizer::parse_gpt2: '" + encoder_json_source + "'";
  const std::string where_bpe = "Tokenizer::parse_gpt2: '" + vocab_bpe_source + "'";
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(encoder_json);
  } catch (const nlohmann::json::exception& e) {
    TT_THROW(where_json, ": invalid JSON: ", e.what());
  }
  TT_CHECK(encoder.is_object(), where_json, ": expected a JSON object {token: id}");
  // Every entry is one token: an id given to two strings would silently drop one of them.
  std::unordered_map<std::string, int32_t> ids;   // token string (byte-to-unicode form) -> id
  std::unordered_map<int32_t, std::string> keys;  // id -> token string
  for (const auto& [key, value] : encoder.items()) {
    TT_CHECK(value.is_number_integer(), where_json, ": the id of '", key, "' is not an integer");
    const int64_t id = value.get<int64_t>();
    TT_CHECK(id >= 0 && id < std::numeric_limits<int32_t>::max(), where_json, ": id ", id, " of '",
             key, "' is out of range");
    const auto [it, inserted] = keys.emplace(static_cast<int32_t>(id), key);
    TT_CHECK(inserted, where_json, ": id ", id, " is given to both '", it->second, "' and '", key,
             "'");
    ids.emplace(key, static_cast<int32_t>(id));
  }
  auto lookup = [&](const std::string& token, const std::string& where,
                    const std::string& context) {
    const auto it = ids.find(token);
    TT_CHECK(it != ids.end(), where, ": ", context, ": token '", token, "' is not in encoder.json");
    return it->second;
  };

  std::array<int32_t, 256> byte_ids{};
  // Ids of bytes and merges: a set, as ids are checked against the vocabulary size only by the
  // constructor, and memory must not grow with an id's value.
  std::unordered_set<int32_t> covered;
  auto cover = [&](int32_t id) { covered.insert(id); };
  for (int b = 0; b < 256; ++b) {
    byte_ids[b] = lookup(gpt2_token_text(std::string(1, static_cast<char>(b))), where_json,
                         detail::str("byte ", b));
    cover(byte_ids[b]);
  }

  const std::string_view bpe = vocab_bpe;
  std::vector<BpeMerge> merges;
  std::size_t line_start = 0;
  for (int64_t line_no = 1; line_start < bpe.size(); ++line_no) {
    std::size_t line_end = bpe.find('\n', line_start);
    if (line_end == std::string::npos) line_end = bpe.size();
    std::string line(bpe.substr(line_start, line_end - line_start));
    line_start = line_end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const std::size_t space = line.find(' ');
    TT_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                 line.find(' ', space + 1) == std::string::npos,
             where_bpe, ": line ", line_no, ": expected 'left right', got '", line, "'");
    const std::string left = line.substr(0, space);
    const std::string right = line.substr(space + 1);
    const std::string context = detail::str("line ", line_no);
    BpeMerge m{lookup(left, where_bpe, context), lookup(right, where_bpe, context),
               lookup(left + right, where_bpe, context)};
    cover(m.id);
    merges.push_back(m);
  }

  // What is neither a byte nor a merge is a special token (GPT-2: "<|endoftext|>"), whose key
  // in encoder.json is its text.
  std::vector<SpecialToken> specials;
  for (const auto& [token, id] : ids) {
    if (!covered.count(id)) specials.push_back({token, id});
  }
  std::sort(specials.begin(), specials.end(),
            [](const SpecialToken& a, const SpecialToken& b) { return a.id < b.id; });
  return Tokenizer(
      Unchecked{}, byte_ids, std::move(merges), std::move(specials), kGpt2Pattern,
      "Tokenizer::parse_gpt2: '" + encoder_json_source + "' + '" + vocab_bpe_source + "'");
}

// ----- training -----------------------------------------------------------------------------

BpeTrainer::BpeTrainer(std::string_view pattern) : pretokenizer_(pattern) {}

void BpeTrainer::add_text(std::string_view text) {
  pretokenizer_.for_each(text, [&](std::string_view piece) {
    ++counts_[std::string(piece)];
    ++num_pretokens_;
  });
}

Tokenizer BpeTrainer::train(int32_t vocab_size, const ProgressFn& progress) const {
  TT_CHECK(vocab_size >= 257, "BpeTrainer::train: vocab_size must be at least 257 (256 bytes + ",
           Tokenizer::kEndOfText, "), got ", vocab_size);
  // Sorted words: the input order of learn_bpe_merges is then fixed too.
  std::vector<std::pair<std::string, int64_t>> sorted(counts_.begin(), counts_.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<BpeWord> words;
  words.reserve(sorted.size());
  for (const auto& [bytes, count] : sorted) {
    BpeWord w;
    w.ids.assign(reinterpret_cast<const uint8_t*>(bytes.data()),
                 reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size());
    w.count = count;
    words.push_back(std::move(w));
  }
  std::vector<BpeMerge> merges =
      learn_bpe_merges(std::move(words), 256, vocab_size - 257, progress);
  std::array<int32_t, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) byte_ids[b] = b;
  const int32_t eot = 256 + static_cast<int32_t>(merges.size());
  return Tokenizer(byte_ids, std::move(merges), {{std::string(Tokenizer::kEndOfText), eot}},
                   pretokenizer_.pattern());
}

}  // namespace tt
