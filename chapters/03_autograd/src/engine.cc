// ============================================================================================
// YOUR EXERCISE FILE for chapter 03_autograd. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch03
// Generated from solutions/03_autograd/engine.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 03 exercises ch03.1 and ch03.2: the backward engine. backward() (given, at the end)
// validates the root, counts dependencies (ch03.1) and runs the work-queue loop (ch03.2).
#include <deque>
#include <unordered_set>
#include <utility>

#include "tt/autograd.h"
#include "tt/ops.h"
#include "tt/todo.h"

namespace tt::autograd {

std::unordered_map<const Node*, int> compute_dependencies(const Node& root) {
  TT_TODO(
      "ch03.1",
      "compute_dependencies: for root and every node reachable from it, the number of edges of reachable nodes that point to it (root: 0); no recursion (a 100,000-node chain must work)");
}

void run_backward(const Edge& root, const Tensor& grad,
                  std::unordered_map<const Node*, int> dependencies, bool retain_graph) {
  TT_CHECK(root.node != nullptr, "run_backward: the root edge has no node");
  TT_CHECK(root.input_nr < root.node->num_outputs(), "run_backward: slot ", root.input_nr, " of ",
           root.node->name(), ", which has ", root.node->num_outputs(), " slots");
  TT_TODO(
      "ch03.2",
      "run_backward: runs every node reachable from root.node once, after all the gradients counted in dependencies have reached it (summed per slot), starting from grad in slot root.input_nr; release_saved() after each node unless retain_graph");
}

void backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  TT_CHECK(root.defined(), "backward: the root is an undefined tensor");
  TT_CHECK(root.requires_grad(), "backward: ", root.describe(),
           " does not require grad and has no grad_fn (did you forget set_requires_grad(), or "
           "was it computed under NoGradGuard?)");
  Tensor g;
  if (grad.defined()) {
    TT_CHECK(grad.shape() == root.shape() && grad.dtype() == root.dtype() &&
                 grad.device() == root.device(),
             "backward: the gradient ", grad.describe(), " does not match the root ",
             root.describe(), " (shape, dtype and device must be equal)");
    g = grad.detach();
  } else {
    TT_CHECK(root.numel() == 1, "backward: a gradient can be created implicitly only for a ",
             "one-element root, got ", root.describe(), "; pass grad with shape ", root.shape());
    g = ones(root.shape(), {root.dtype(), root.device()});
  }
  NoGradGuard no_grad;  // backward functions compute gradients; they are not recorded
  const Edge edge = gradient_edge(root);
  std::unordered_map<const Node*, int> dependencies = compute_dependencies(*edge.node);
  // Tells each leaf's last AccumulateGrad node that it is the last (post-accumulate-grad hooks).
  PostAccumulateGradScope hook_scope(dependencies);
  run_backward(edge, g, std::move(dependencies), retain_graph);
}

}  // namespace tt::autograd
