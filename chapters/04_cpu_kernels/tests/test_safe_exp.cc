// tt/safe_exp.h: the exp of the kernels' probabilities. Eigen's SIMD exp clamps its argument
// (exp(-inf) = 5.56e-309 in double, 2.94e-39 in float on SSE and AVX2 builds); the helpers give
// exactly 0 there on every path, and the SIMD (safe_exp_inplace) and scalar (safe_exp) paths
// give the same zeros and agree within a few ulps elsewhere. CI runs this file twice: in the
// -march=native build and in the x86-64-v2 (SSE4.2) sanitizer build.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "tt/safe_exp.h"
#include "tt/testing.h"

namespace tt {
namespace {

template <typename T>
void check_safe_exp() {
  constexpr T kInf = std::numeric_limits<T>::infinity();
  const T tiny = std::numeric_limits<T>::min();  // the smallest normal number
  const double log_tiny = std::log(static_cast<double>(tiny));
  std::vector<T> x = {-kInf, T(0), T(-0.0), kInf, std::numeric_limits<T>::quiet_NaN(), T(-1)};
  for (double a = -800; a <= 20; a += 0.37) x.push_back(static_cast<T>(a));
  const auto n = static_cast<int64_t>(x.size());
  // Misaligned starts: Eigen computes an unaligned head and the tail with std::exp, the rest
  // with its SIMD polynomial; every element is met on both paths across the offsets.
  for (int64_t offset = 0; offset < 4; ++offset) {
    std::vector<T> simd(x.begin() + offset, x.end());
    safe_exp_inplace(simd.data(), n - offset);
    for (int64_t i = offset; i < n; ++i) {
      const T xi = x[i], s = simd[i - offset], e = safe_exp(xi);
      SCOPED_TRACE(::testing::Message() << "x = " << xi << " offset " << offset);
      if (std::isnan(xi)) {
        EXPECT_TRUE(std::isnan(s) && std::isnan(e));
        continue;
      }
      EXPECT_TRUE(s == 0 || s >= tiny) << "SIMD result " << s << " is subnormal";
      EXPECT_TRUE(e == 0 || e >= tiny) << "scalar result " << e << " is subnormal";
      if (xi < log_tiny - 1e-3) {  // exp(x) is below the smallest normal number
        EXPECT_EQ(s, T(0));
        EXPECT_EQ(e, T(0));
      } else if (xi > log_tiny + 1e-3) {
        const double want = std::exp(static_cast<double>(xi));
        const double tol = 4 * std::numeric_limits<T>::epsilon() * want;
        if (std::isinf(xi)) {
          EXPECT_EQ(e, kInf);
          EXPECT_EQ(s, kInf);
        } else {
          EXPECT_NEAR(static_cast<double>(e), want, tol);
          EXPECT_NEAR(static_cast<double>(s), want, tol);
        }
      }
    }
  }
  EXPECT_EQ(safe_exp(-kInf), T(0));
  EXPECT_EQ(safe_exp(T(0)), T(1));
  EXPECT_EQ(safe_exp(kInf), kInf);
  safe_exp_inplace<T>(nullptr, 0);  // an empty run changes nothing
}

TEST(Ch04_SafeExp, MinusInfinityIsZeroOnSimdAndScalarPathsFloat) {
  check_safe_exp<float>();
}

TEST(Ch04_SafeExp, MinusInfinityIsZeroOnSimdAndScalarPathsDouble) {
  check_safe_exp<double>();
}

template <typename T>
void check_max_ignoring_nan() {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (int64_t n : {0, 1, 15, 16, 17, 40, 1000}) {
    std::vector<T> x(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(std::sin(0.7 * i) * 100 - 50);
    for (int64_t i = 0; i < n; i += 7) x[i] = nan;  // NaN is skipped, as std::fmax skips it
    if (n > 20) x[19] = T(1e4);                     // the maximum in a tail lane of a block
    T want = -inf;
    for (const T v : x) want = std::fmax(want, v);
    EXPECT_EQ(max_ignoring_nan(x.data(), n), want) << "n = " << n;
  }
  const std::vector<T> all_nan(33, nan);
  EXPECT_EQ(max_ignoring_nan(all_nan.data(), 33), -inf) << "all NaN gives -inf, as fmax from -inf";
  const std::vector<T> masked(20, -inf);
  EXPECT_EQ(max_ignoring_nan(masked.data(), 20), -inf);
}

TEST(Ch04_SafeExp, MaxIgnoringNanIsTheFmaxChainFloat) {
  check_max_ignoring_nan<float>();
}

TEST(Ch04_SafeExp, MaxIgnoringNanIsTheFmaxChainDouble) {
  check_max_ignoring_nan<double>();
}

}  // namespace
}  // namespace tt
