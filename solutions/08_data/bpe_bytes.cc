// Chapter 08 exercise ch08.3: GPT-2's byte-to-unicode table.
// The reference solution lives here; tools/sync_starters generates the learner's starter
// chapters/08_data/src/bpe_bytes.cc from this file.
#include "tt/bpe.h"
#include "tt/todo.h"

namespace tt {

std::array<char32_t, 256> gpt2_bytes_to_unicode() {
#if TT_SOLUTION
  // Bytes that are visible Latin-1 characters keep their code point; the others (control
  // characters, space, DEL, NBSP, soft hyphen, ...) are moved, in order, to 256, 257, ...
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) table[b] = printable(b) ? static_cast<char32_t>(b) : next++;
  return table;
#else
  TT_TODO("ch08.3",
          "gpt2_bytes_to_unicode: a bijection from the 256 bytes to code points; bytes '!'..'~', "
          "0xA1..0xAC, 0xAE..0xFF map to themselves, the other 68 in increasing order to 256, "
          "257, ..., 323");
#endif
}

}  // namespace tt
