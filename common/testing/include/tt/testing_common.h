/// @file testing_common.h
/// @brief Test helpers that need nothing but common/ (so common/'s own tests use them too):
/// expectations on tt::Error messages, table-driven misuse tests, the CUDA skip, and the step
/// counts of long runs under the sanitizers.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tt/cuda_probe.h"
#include "tt/error.h"
#include "tt/todo.h"

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define TT_TESTING_SANITIZED 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define TT_TESTING_SANITIZED 1
#endif
#endif

namespace tt::testing {

/// True when the tests are compiled under AddressSanitizer (the "asan" preset). There every
/// allocation records its stack and every access is checked: the tiny models' training runs,
/// thousands of small tensor operations, take 20-40 times longer than in the normal build.
#ifdef TT_TESTING_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// `steps` in the normal build, `sanitized` (fewer) under the sanitizers: a long equality run
/// checks the numerics over many steps in the normal build (README command (2)), while under
/// ASan/UBSan a few steps take every code path of the run, which is what that build checks.
constexpr int steps_unless_sanitized(int steps, int sanitized) {
  return kSanitized ? sanitized : steps;
}

/// Runs `fn` and checks that it throws tt::Error whose message contains every string in
/// `needles`. A tt::NotImplemented (an unfinished exercise) or any other exception fails the
/// check with its own message, so a starter never passes an error test by accident.
template <typename Fn>
::testing::AssertionResult throws_tt_error(Fn&& fn, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const tt::Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) {
      if (msg.find(n) == std::string::npos) {
        return ::testing::AssertionFailure() << "tt::Error message lacks \"" << n << "\": " << msg;
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const tt::NotImplemented& e) {
    return ::testing::AssertionFailure() << e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure()
           << "expected tt::Error, got another exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "expected tt::Error, nothing was thrown";
}

/// throws_tt_error with the needles as a braced list: `throws_tt_error(fn, {"add", "[2]"})`.
template <typename Fn>
::testing::AssertionResult throws_tt_error(Fn&& fn, std::initializer_list<std::string> needles) {
  return throws_tt_error(std::forward<Fn>(fn), std::vector<std::string>(needles));
}

/// One row of a table-driven misuse test: `call` must throw tt::Error whose message contains
/// every needle (the op's name, the offending shapes, dtypes, devices or values).
struct MisuseCase {
  std::string what;                  ///< label printed when the row fails
  std::function<void()> call;        ///< the misuse
  std::vector<std::string> needles;  ///< substrings the error message must contain
};

/// EXPECTs every row of `cases` (see throws_tt_error); a failure names the row.
inline void expect_errors(const std::vector<MisuseCase>& cases) {
  for (const MisuseCase& c : cases) {
    EXPECT_TRUE(throws_tt_error(c.call, c.needles)) << "case: " << c.what;
  }
}

}  // namespace tt::testing

/// EXPECT that `stmt` throws tt::Error whose message contains each of the given strings:
/// `EXPECT_TT_ERROR(a.view({7}), "view", "[2, 3]");`
#define EXPECT_TT_ERROR(stmt, ...) \
  EXPECT_TRUE(::tt::testing::throws_tt_error([&] { (void)(stmt); }, {__VA_ARGS__}))

/// Skips the current test (reported as SKIPPED, never as passed) when no CUDA device is usable.
#define TT_SKIP_IF_NO_CUDA()                                                \
  do {                                                                      \
    if (::tt::cuda_device_count() == 0) {                                   \
      GTEST_SKIP() << (::tt::built_with_cuda() ? "no CUDA device available" \
                                               : "built without CUDA");     \
    }                                                                       \
  } while (0)
