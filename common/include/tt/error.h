/// @file error.h
/// @brief Errors and checks: every failure in TinyInfiniTrain is a tt::Error with a message that
/// names the operation, the shapes, the dtype and the device involved.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tt {

/// The exception type for every detected misuse or failure (bad shapes, dtypes, files, ...).
class Error : public std::runtime_error {
 public:
  /// Creates an error carrying the full, already formatted message.
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
/// Streams one value of an error message (the general case: `os << value`).
template <typename T>
void put(std::ostream& os, const T& value) {
  os << value;
}
/// Streams a vector (e.g. a shape) as "[2, 3]".
template <typename T>
void put(std::ostream& os, const std::vector<T>& values) {
  os << '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) os << ", ";
    put(os, values[i]);
  }
  os << ']';
}
/// Concatenates any streamable values (vectors print as [a, b]) into one string: the message
/// builder of TT_CHECK.
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (put(os, args), ...);
  return os.str();
}

/// Throws tt::Error with "message (at file:line)". Never returns.
[[noreturn]] void throw_error(const std::string& message, const char* file, int line);
}  // namespace detail

}  // namespace tt

/// Throws tt::Error whose message is the concatenation of the arguments (any streamable values).
#define TT_THROW(...) ::tt::detail::throw_error(::tt::detail::str(__VA_ARGS__), __FILE__, __LINE__)

/// Throws tt::Error with the formatted message when `cond` is false.
/// Example: `TT_CHECK(a.dim() == 2, "matmul: expected a 2-D tensor, got shape ", a.shape());`
#define TT_CHECK(cond, ...)     \
  do {                          \
    if (!(cond)) [[unlikely]] { \
      TT_THROW(__VA_ARGS__);    \
    }                           \
  } while (0)
