// ============================================================================================
// YOUR EXERCISE FILE for chapter 03_autograd. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch03
// Generated from solutions/03_autograd/function.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 03 exercises ch03.3 and ch03.4: recording the graph, and the leaf's gradient sink.
#include <utility>

#include "tt/autograd.h"
#include "tt/ops.h"
#include "tt/todo.h"

namespace tt::autograd {

Edge gradient_edge(const Tensor& t) {
  TT_TODO(
      "ch03.3",
      "gradient_edge: where t's gradient goes: no edge unless t requires grad; {grad_fn, output_nr} for a computed tensor; a new AccumulateGrad sink for a leaf");
}

std::vector<Tensor> Function::run(const std::shared_ptr<Function>& fn,
                                  const std::vector<Tensor>& inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TT_CHECK(inputs[i].defined(), fn->name(), ": input ", i, " is an undefined tensor");
  }
  TT_TODO(
      "ch03.3",
      "Function::run: fn->forward(inputs) computed with grad mode off; when grad mode is on and an input requires grad, fn becomes the grad_fn of every output (output i in slot i) with one edge per input and its context saved; no input ever gets a new grad_fn");
}

void AccumulateGrad::accumulate(const Tensor& g) {
  TT_TODO(
      "ch03.4",
      "AccumulateGrad::accumulate: adds the incoming gradient into the leaf's .grad (the first one stored as a private copy, later ones added in place); nothing when the leaf is gone or the gradient undefined; throws when shape, dtype or device differ from the leaf's");
}

}  // namespace tt::autograd
