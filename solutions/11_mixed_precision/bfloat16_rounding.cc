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
#if TT_SOLUTION
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: keep the sign and the upper payload, and set the quiet bit. Truncating alone could
    // leave a mantissa of 0, i.e. infinity; rounding could carry into the exponent.
    return bfloat16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  // Add just under half a step (0x7FFF) plus the lowest kept bit, then truncate: a dropped part
  // above half carries into the kept bits, one exactly at half carries only when the kept part is
  // odd (ties to even), one below half never does. A carry out of the mantissa moves into the
  // exponent, which is the correct result (the next binade; from the largest finite value,
  // infinity). Denormals need no special case: their bits round the same way.
  const uint32_t lowest_kept = (u >> 16) & 1u;
  return bfloat16{static_cast<uint16_t>((u + 0x7FFFu + lowest_kept) >> 16)};
#else
  (void)x;
  TT_TODO("ch11.1",
          "float_to_bfloat16_rne: the bfloat16 nearest to x, ties to the even mantissa; "
          "denormals rounded the same way (no flush), |x| >= 0x1.FFp127 (a tie above the "
          "largest) to +-inf, +-inf and the sign of zero kept, NaN stays NaN (sign and upper "
          "payload kept, quiet bit set)");
#endif
}

}  // namespace tt
