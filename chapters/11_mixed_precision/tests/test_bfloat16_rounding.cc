// Exercise ch11.1: float_to_bfloat16_rne, bit by bit. The reference here rounds differently:
// in double arithmetic, with std::nearbyint on the value scaled to bfloat16 steps (the
// solution works on the bits).
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tt/bfloat16_cast.h"
#include "tt/testing.h"

namespace tt {
namespace {

uint32_t bits_of(float x) {
  return std::bit_cast<uint32_t>(x);
}
float float_of(uint32_t u) {
  return std::bit_cast<float>(u);
}
uint16_t rne(float x) {
  return float_to_bfloat16_rne(x).bits;
}
bool is_nan_bits(uint16_t b) {
  return (b & 0x7F80u) == 0x7F80u && (b & 0x007Fu) != 0;
}

// The bits of the bfloat16 nearest to a finite or infinite x, ties to even, computed in double:
// the value divided by the bfloat16 step of its binade is rounded to an integer by nearbyint
// (round half to even in the default rounding mode) and multiplied back. A result of 2^128 or
// more is not a finite float: float(2^128) is infinity, as IEEE rounding says it must be.
uint16_t reference_rne(float x) {
  if (std::isinf(x)) return static_cast<uint16_t>(bits_of(x) >> 16);
  const double d = x;
  int e = 0;
  std::frexp(d, &e);                               // |d| in [2^(e-1), 2^e)
  const int step_exp = std::max(e - 1, -126) - 7;  // 7 mantissa bits; denormals: fixed 2^-133
  const double step = std::ldexp(1.0, step_exp);
  const double r = std::nearbyint(d / step) * step;  // exact: both are powers of two
  const float f = static_cast<float>(r);             // exact, or infinity past 2^128
  const uint32_t u = bits_of(std::copysign(f, x));   // keeps the sign of a rounded-away zero
  EXPECT_EQ(u & 0xFFFFu, 0u) << "reference: " << r << " is not a bfloat16";
  return static_cast<uint16_t>(u >> 16);
}

void expect_rounds_like_reference(uint32_t u) {
  const float x = float_of(u);
  if (std::isnan(x)) return;
  ASSERT_EQ(rne(x), reference_rne(x)) << std::hexfloat << x << " (bits 0x" << std::hex << u << ")";
}

TEST(Ch11_1_RoundToNearestEven, ReferenceSelfCheck) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  EXPECT_EQ(reference_rne(1.0f), 0x3F80);
  EXPECT_EQ(reference_rne(float_of(0x3F808000u)), 0x3F80);  // tie, even below
  EXPECT_EQ(reference_rne(float_of(0x3F818000u)), 0x3F82);  // tie, even above
  EXPECT_EQ(reference_rne(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(reference_rne(-0.0f), 0x8000);
}

TEST(Ch11_1_RoundToNearestEven, EveryBFloat16IsKept) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const uint16_t r = rne(bfloat16_to_float({h}));
    if (!is_nan_bits(h)) {
      ASSERT_EQ(r, h) << "bfloat16 0x" << std::hex << b << " did not survive the round trip";
    } else {  // NaN stays NaN, same sign and payload, quiet bit set (kept if already set)
      ASSERT_EQ(r, h | 0x0040) << "NaN 0x" << std::hex << b;
    }
  }
}

TEST(Ch11_1_RoundToNearestEven, TiesGoToEven) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    if ((h & 0x7F80u) == 0x7F80u || (h & 0x7FFFu) == 0x7F7Fu) continue;  // inf/NaN; max below
    const uint32_t u = b << 16;
    const uint16_t up = static_cast<uint16_t>(h + 1);  // next magnitude, same sign
    ASSERT_EQ(rne(float_of(u | 0x8000u)), (h & 1u) ? up : h) << "tie above 0x" << std::hex << b;
    ASSERT_EQ(rne(float_of(u | 0x7FFFu)), h) << "just below the tie above 0x" << std::hex << b;
    ASSERT_EQ(rne(float_of(u | 0x8001u)), up) << "just above the tie above 0x" << std::hex << b;
    ASSERT_EQ(rne(float_of(u | 0x0001u)), h) << "one float step above 0x" << std::hex << b;
  }
}

TEST(Ch11_1_RoundToNearestEven, SpecialValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(rne(0.0f), 0x0000);
  EXPECT_EQ(rne(-0.0f), 0x8000);
  EXPECT_EQ(rne(kInf), 0x7F80);
  EXPECT_EQ(rne(-kInf), 0xFF80);
  EXPECT_EQ(rne(1.0f), 0x3F80);
  EXPECT_EQ(rne(-2.5f), 0xC020);
  EXPECT_EQ(rne(0.1f), 0x3DCD);  // 0x3DCCCCCD: dropped part 0xCCCD > half
  EXPECT_EQ(rne(1.0f / 3.0f), 0x3EAB);
  // NaN: never infinity, quiet, sign and upper payload kept; rounding must not carry.
  EXPECT_EQ(rne(float_of(0x7F800001u)), 0x7FC0);  // signaling, payload in the dropped bits only
  EXPECT_EQ(rne(float_of(0xFF800001u)), 0xFFC0);
  EXPECT_EQ(rne(float_of(0x7FC00000u)), 0x7FC0);  // the default quiet NaN
  EXPECT_EQ(rne(float_of(0x7FFFFFFFu)), 0x7FFF);  // all ones: would carry into the sign
  EXPECT_EQ(rne(float_of(0x7FA12345u)), 0x7FE1);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16_rne(std::nanf("")))));
  // Overflow by rounding: the largest bfloat16 is 0x7F7F = 0x1.FEp127; halfway to the next
  // binade (0x1.FFp127) is a tie whose even neighbour is infinity.
  EXPECT_EQ(rne(float_of(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(rne(float_of(0x7F7F8000u)), 0x7F80);
  EXPECT_EQ(rne(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(rne(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(rne(float_of(0x7F7E8000u)), 0x7F7E);  // a tie below the largest: stays finite
  // Denormals: rounded like everything else, never flushed.
  EXPECT_EQ(rne(float_of(0x00000001u)), 0x0000);  // the smallest float denormal
  EXPECT_EQ(rne(float_of(0x80000001u)), 0x8000);  // ... rounds to a zero of its sign
  EXPECT_EQ(rne(float_of(0x00008000u)), 0x0000);  // tie, even is 0
  EXPECT_EQ(rne(float_of(0x00018000u)), 0x0002);  // tie, even is 2
  EXPECT_EQ(rne(float_of(0x00010000u)), 0x0001);  // the smallest bfloat16 denormal
  EXPECT_EQ(rne(float_of(0x007FFFFFu)), 0x0080);  // largest denormal -> smallest normal
  EXPECT_EQ(rne(std::numeric_limits<float>::min()), 0x0080);
}

TEST(Ch11_1_RoundToNearestEven, NegativeIsTheMirrorImage) {
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng() & 0x7FFFFFFFu;
    if (std::isnan(float_of(u))) continue;
    ASSERT_EQ(rne(float_of(u | 0x80000000u)), rne(float_of(u)) | 0x8000) << std::hex << u;
  }
}

TEST(Ch11_1_RoundToNearestEven, MatchesADoubleReference) {
  // Every 509th float bit pattern (8.4 million of them, all binades, both signs), then random
  // patterns whose dropped half sits near a tie.
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 509) {
    expect_rounds_like_reference(static_cast<uint32_t>(u));
    if (HasFatalFailure()) return;
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t hi = rng() & 0xFFFF0000u;
    const uint32_t lo = 0x8000u + (rng() % 5) - 2;  // 0x7FFE .. 0x8002
    expect_rounds_like_reference(hi | lo);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace tt
