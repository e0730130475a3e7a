// GPT-2's pre-tokenizer: a PCRE2 regex in UTF + UCP mode that also accepts invalid UTF-8.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tt/bpe.h"
#include "tt/error.h"

namespace tt {
namespace {

std::string pcre2_message(int code) {
  std::string buf(256, '\0');
  const int n =
      pcre2_get_error_message(code, reinterpret_cast<PCRE2_UCHAR*>(buf.data()), buf.size());
  buf.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return buf;
}

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

}  // namespace

struct Pretokenizer::Impl {
  std::string pattern;
  std::unique_ptr<pcre2_code, CodeDeleter> code;
  bool jit = false;
};

Pretokenizer::Pretokenizer(std::string_view pattern) : impl_(std::make_unique<Impl>()) {
  impl_->pattern = std::string(pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  // UTF: the subject is UTF-8; UCP: \s, \p{L}, ... use Unicode properties; MATCH_INVALID_UTF:
  // invalid sequences are skipped over instead of making pcre2_match fail.
  impl_->code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error,
                                  &error_offset, nullptr));
  TT_CHECK(impl_->code != nullptr, "Pretokenizer: invalid regex at offset ", error_offset, ": ",
           pcre2_message(error), " (pattern: ", pattern, ")");
  // JIT is an optimization only: without it (no JIT support in this libpcre2) the interpreter
  // gives the same matches.
  impl_->jit = pcre2_jit_compile(impl_->code.get(), PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

bool Pretokenizer::jit() const {
  return impl_->jit;
}
const std::string& Pretokenizer::pattern() const {
  return impl_->pattern;
}

void Pretokenizer::for_each(std::string_view text,
                            const std::function<void(std::string_view)>& fn) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(impl_->code.get(), nullptr));
  TT_CHECK(md != nullptr, "Pretokenizer: out of memory for the match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(impl_->code.get(), subject, text.size(), pos, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    TT_CHECK(rc >= 0, "Pretokenizer: pcre2_match failed at byte ", pos, ": ", pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const std::size_t start = ov[0];
    const std::size_t end = ov[1];
    // No alternative of GPT-2's pattern matches the empty string; a custom pattern that does
    // would loop forever, so treat an empty match as an error.
    TT_CHECK(end > start, "Pretokenizer: the pattern matched the empty string at byte ", start,
             " (pattern: ", impl_->pattern, ")");
    if (start > pos) fn(text.substr(pos, start - pos));  // bytes no match covers (invalid UTF-8)
    fn(text.substr(start, end - start));
    pos = end;
  }
  if (pos < text.size()) fn(text.substr(pos));
}

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  for_each(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

}  // namespace tt
