// Chapter 05 exercise ch05.6: loading a state dict is all-or-nothing. Every key, shape and dtype
// is checked first; only when nothing is wrong are the values copied.
#include <map>
#include <sstream>

#include "tt/module.h"
#include "tt/todo.h"

namespace tt::nn {

void apply_state_dict(const StateDict& targets, const StateDict& state, const std::string& source,
                      bool strict) {
#if TT_SOLUTION
  std::vector<std::string> problems;
  // Index the incoming state by name; a repeated key is a problem by itself.
  std::map<std::string, const Tensor*> incoming;
  for (const auto& [name, t] : state) {
    if (!incoming.emplace(name, &t).second) problems.push_back("duplicate key '" + name + "'");
  }
  // Phase 1: validate every target (nothing is written yet).
  std::vector<std::pair<const Tensor*, const Tensor*>> copies;  // (target, value)
  std::map<std::string, bool> wanted;
  for (const auto& [name, target] : targets) {
    wanted[name] = true;
    const auto it = incoming.find(name);
    if (it == incoming.end()) {
      if (strict) problems.push_back("missing key '" + name + "'");
      continue;
    }
    const Tensor& value = *it->second;
    if (!value.defined()) {
      problems.push_back("key '" + name + "' holds an undefined tensor");
    } else if (value.dtype() != target.dtype()) {
      problems.push_back(detail::str("dtype mismatch for '", name, "': ", dtype_name(value.dtype()),
                                     " in ", source, ", ", dtype_name(target.dtype()),
                                     " expected"));
    } else if (value.shape() != target.shape()) {
      problems.push_back(detail::str("shape mismatch for '", name, "': ", value.shape(), " in ",
                                     source, ", ", target.shape(), " expected"));
    } else {
      copies.emplace_back(&target, &value);
    }
  }
  if (strict) {
    for (const auto& [name, t] : incoming) {
      if (!wanted.count(name)) problems.push_back("unexpected key '" + name + "'");
    }
  }
  if (!problems.empty()) {
    std::ostringstream msg;
    msg << "load_state_dict(" << source << "): " << problems.size()
        << " problem(s), nothing was loaded:";
    for (const auto& p : problems) msg << "\n  - " << p;
    TT_THROW(msg.str());
  }
  // Phase 2: commit. copy_ cannot fail any more: shapes and dtypes match.
  for (const auto& [target, value] : copies) target->copy_(*value);
#else
  TT_TODO("ch05.6",
          "apply_state_dict: copies state[name] into the target of that name, all or nothing: "
          "every problem (missing or unexpected key when strict, duplicate key, undefined "
          "tensor, dtype or shape mismatch) is listed in one tt::Error naming source, and then "
          "no target has changed");
#endif
}

StateDict prefixed(const std::string& prefix, const StateDict& state) {
  StateDict out;
  out.reserve(state.size());
  for (const auto& [name, t] : state) out.emplace_back(prefix + "." + name, t);
  return out;
}

}  // namespace tt::nn
