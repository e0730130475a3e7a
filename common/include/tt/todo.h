/// @file todo.h
/// @brief TT_TODO marks an exercise: it throws tt::NotImplemented naming the exercise id.
///
/// Exercise files are written once, in solutions/NN_topic/, as
/// @code
/// #if TT_SOLUTION
///   ... reference implementation ...
/// #else
///   TT_TODO("ch04.10", "cpu::softmax_forward: out = exp(x) / sum of exp(x) along dim, ...");
/// #endif
/// @endcode
/// and tools/sync_starters generates the learner's starter (the `#else` branch) from them.
/// The text is "Title: contract": the title (before the first ": ") is the exercise title shown
/// by check-chNN, the contract states what must hold (never the recipe: that is in the chapter
/// README's folded hints). The chapter README's exercises table is generated from these texts.
#pragma once

#include <stdexcept>
#include <string>

namespace tt {

/// Thrown by an exercise that has not been implemented yet. It is deliberately NOT a tt::Error,
/// so a test expecting a tt::Error (bad input) fails on a starter instead of passing by accident.
class NotImplemented : public std::logic_error {
 public:
  /// Builds "TODO chNN.M not implemented: <hint> (at file:line)".
  NotImplemented(const std::string& id, const std::string& hint, const char* file, int line);
  /// The exercise id, e.g. "ch04.3".
  const std::string& id() const { return id_; }

 private:
  std::string id_;
};

namespace detail {
/// Throws tt::NotImplemented. Never returns, so starters compile without a return statement.
[[noreturn]] void todo(const char* id, const char* hint, const char* file, int line);
}  // namespace detail

}  // namespace tt

/// Marks an unimplemented exercise: throws tt::NotImplemented("TODO <id> ...").
#define TT_TODO(id, hint) ::tt::detail::todo(id, hint, __FILE__, __LINE__)
