#include "tt/error.h"

#include "tt/todo.h"

namespace tt {
namespace detail {

void throw_error(const std::string& message, const char* file, int line) {
  throw Error(message + " (at " + file + ":" + std::to_string(line) + ")");
}

void todo(const char* id, const char* hint, const char* file, int line) {
  throw NotImplemented(id, hint, file, line);
}

}  // namespace detail

NotImplemented::NotImplemented(const std::string& id, const std::string& hint, const char* file,
                               int line)
    : std::logic_error("TODO " + id + " not implemented: " + hint + " (at " + file + ":" +
                       std::to_string(line) + ")"),
      id_(id) {}

}  // namespace tt
