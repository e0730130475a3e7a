// ============================================================================================
// YOUR EXERCISE FILE for chapter 11_mixed_precision. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch11
// Generated from solutions/11_mixed_precision/bfloat16_rounding.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercise ch11.1: float32 -> bfloat16, rounded to nearest with ties to even, at the bit level.
//
// A bfloat16 is the upper half of a float32: sign, the same 8 exponent bits, the top 7 of the
// 23 mantissa bits. Rounding therefore only looks at the 16 bits that are dropped. Chapter 11's
// CPU "cast" kernel calls this function for every element; the CUDA kernel uses the GPU's
// instruction instead, and the tests hold the two to the same bits.
#include <bit>
#include <cstdint>

#include "tt/bfloat16_cast.h"
#include "tt/todo.h"

namespace tt {

bfloat16 float_to_bfloat16_rne(float x) {
  (void)x;
  TT_TODO("ch11.1",
          "float_to_bfloat16_rne: the bfloat16 nearest to x, ties to the even mantissa; "
          "denormals rounded the same way (no flush), |x| >= 0x1.FFp127 (a tie above the "
          "largest) to +-inf, +-inf and the sign of zero kept, NaN stays NaN (sign and upper "
          "payload kept, quiet bit set)");
}

}  // namespace tt
