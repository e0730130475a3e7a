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
#if TT_SOLUTION
  std::unordered_map<const Node*, int> dependencies{{&root, 0}};
  // Depth-first walk with an explicit stack (a recursive walk would overflow on long chains).
  // Every edge between reachable nodes is counted once; every node is expanded once.
  std::vector<const Node*> stack{&root};
  std::unordered_set<const Node*> seen{&root};
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges()) {
      const Node* next = e.node.get();
      if (next == nullptr) continue;
      ++dependencies[next];
      if (seen.insert(next).second) stack.push_back(next);
    }
  }
  return dependencies;
#else
  TT_TODO(
      "ch03.1",
      "compute_dependencies: for root and every node reachable from it, the number of edges of reachable nodes that point to it (root: 0); no recursion (a 100,000-node chain must work)");
#endif
}

void run_backward(const Edge& root, const Tensor& grad,
                  std::unordered_map<const Node*, int> dependencies, bool retain_graph) {
  TT_CHECK(root.node != nullptr, "run_backward: the root edge has no node");
  TT_CHECK(root.input_nr < root.node->num_outputs(), "run_backward: slot ", root.input_nr, " of ",
           root.node->name(), ", which has ", root.node->num_outputs(), " slots");
#if TT_SOLUTION
  // Gradients collected so far for each node that has received some but has not run yet:
  // one slot per output of its forward op.
  std::unordered_map<const Node*, std::vector<Tensor>> buffers;
  buffers[root.node.get()].resize(root.node->num_outputs());
  buffers[root.node.get()][root.input_nr] = grad;

  std::deque<std::shared_ptr<Node>> ready{root.node};
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.front());
    ready.pop_front();
    std::vector<Tensor> inputs = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    inputs.resize(node->num_outputs());

    std::vector<Tensor> grads = node->apply(inputs);
    inputs.clear();  // free the incoming gradients as early as possible
    if (!retain_graph) node->release_saved();

    const std::vector<Edge>& edges = node->next_edges();
    TT_CHECK(grads.size() == edges.size() || (grads.empty() && edges.empty()), node->name(),
             " returned ", grads.size(), " gradients for ", edges.size(), " inputs");
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.node) continue;
      if (grads[i].defined()) {
        std::vector<Tensor>& slots = buffers[e.node.get()];
        if (slots.empty()) slots.resize(e.node->num_outputs());
        Tensor& slot = slots.at(e.input_nr);
        // Two branches meet here: the gradient is the sum of both contributions.
        slot = slot.defined() ? binary_op("add", slot, grads[i]) : std::move(grads[i]);
      }
      if (--dependencies.at(e.node.get()) == 0) ready.push_back(e.node);
    }
  }
#else
  TT_TODO(
      "ch03.2",
      "run_backward: runs every node reachable from root.node once, after all the gradients counted in dependencies have reached it (summed per slot), starting from grad in slot root.input_nr; release_saved() after each node unless retain_graph");
#endif
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
