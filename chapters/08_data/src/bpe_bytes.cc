// ============================================================================================
// YOUR EXERCISE FILE for chapter 08_data. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch08
// Generated from solutions/08_data/bpe_bytes.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 08 exercise ch08.3: GPT-2's byte-to-unicode table.
// The reference solution lives here; tools/sync_starters generates the learner's starter
// chapters/08_data/src/bpe_bytes.cc from this file.
#include "tt/bpe.h"
#include "tt/todo.h"

namespace tt {

std::array<char32_t, 256> gpt2_bytes_to_unicode() {
  TT_TODO("ch08.3",
          "gpt2_bytes_to_unicode: a bijection from the 256 bytes to code points; bytes '!'..'~', "
          "0xA1..0xAC, 0xAE..0xFF map to themselves, the other 68 in increasing order to 256, "
          "257, ..., 323");
}

}  // namespace tt
