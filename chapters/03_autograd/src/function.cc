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
  TT_TODO("ch03.3", "gradient_edge: no edge unless t requires grad; {grad_fn, output_nr} for a recorded result; a new AccumulateGrad for a leaf");
}

std::vector<Tensor> Function::run(const std::shared_ptr<Function>& fn,
                                  const std::vector<Tensor>& inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TT_CHECK(inputs[i].defined(), fn->name(), ": input ", i, " is an undefined tensor");
  }
  TT_TODO("ch03.3", "Function::apply: record only if grad mode is on and an input requires grad; run forward under NoGradGuard; set edges (gradient_edge), num_outputs, record_metadata, setup_context, then each output's grad_fn");
}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grad_outputs) {
  TT_CHECK(grad_outputs.size() == 1, "AccumulateGrad: expected 1 gradient, got ",
           grad_outputs.size());
  TT_TODO("ch03.4", "AccumulateGrad::apply: lock the leaf (skip if gone or g undefined), check g against it, store a clone of the first gradient, add later ones in place");
}

}  // namespace tt::autograd
