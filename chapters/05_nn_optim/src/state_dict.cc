// ============================================================================================
// YOUR EXERCISE FILE for chapter 05_nn_optim. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch05
// Generated from solutions/05_nn_optim/state_dict.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 05 exercise ch05.6: loading a state dict is all-or-nothing. Every key, shape and dtype
// is checked first; only when nothing is wrong are the values copied.
#include <map>
#include <sstream>

#include "tt/module.h"
#include "tt/todo.h"

namespace tt::nn {

void apply_state_dict(const StateDict& targets, const StateDict& state, const std::string& source,
                      bool strict) {
  TT_TODO("ch05.6",
          "apply_state_dict: copies state[name] into the target of that name, all or nothing: "
          "every problem (missing or unexpected key when strict, duplicate key, undefined "
          "tensor, dtype or shape mismatch) is listed in one tt::Error naming source, and then "
          "no target has changed");
}

StateDict prefixed(const std::string& prefix, const StateDict& state) {
  StateDict out;
  out.reserve(state.size());
  for (const auto& [name, t] : state) out.emplace_back(prefix + "." + name, t);
  return out;
}

}  // namespace tt::nn
