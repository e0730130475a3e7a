/// @file autograd.h
/// @brief Reverse-mode automatic differentiation: Function (an op with forward and backward),
/// the recorded graph of Nodes, the backward Engine, no_grad, and gradcheck.
///
/// Recording: Function::apply runs forward() with grad mode off. When grad mode is on and any
/// input requires grad, the Function object itself becomes a graph Node: it remembers, for each
/// input, the Edge to where that input's gradient must go (the input's producer, or an
/// AccumulateGrad node for a leaf), and every output points back to it (grad_fn, output_nr).
///
/// Backward: the Engine counts, for every node reachable from the root, how many gradients it
/// will receive; it then runs nodes from a work queue (no recursion, so 10,000-op chains work),
/// summing gradients where branches meet and accumulating into leaf .grad.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tt/tensor.h"

namespace tt::autograd {

class Node;

/// Where a gradient flows: input `input_nr` of `node` (node == nullptr: nowhere, the input did
/// not require grad).
struct Edge {
  std::shared_ptr<Node> node;  ///< receiver of the gradient
  uint32_t input_nr = 0;       ///< which of the receiver's gradient slots
};

/// A recorded operation: maps the gradients of its outputs to the gradients of its inputs.
class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node();
  /// Op name for messages and graph printing, e.g. "AddBackward".
  virtual std::string name() const = 0;
  /// Given one gradient per output (an undefined Tensor where an output got no gradient),
  /// returns one gradient per input (undefined where not needed).
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  /// One edge per input of the forward op.
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  /// Number of outputs of the forward op (= number of gradient slots of this node).
  uint32_t num_outputs() const { return num_outputs_; }
  /// Sets the edges (called by Function::apply).
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  /// Sets the number of outputs (called by Function::apply).
  void set_num_outputs(uint32_t n) { num_outputs_ = n; }
  /// Number of Node objects alive in the process (tests prove graphs are freed).
  static int64_t live_count();

 protected:
  Node();

 private:
  std::vector<Edge> next_edges_;
  uint32_t num_outputs_ = 0;
};

/// The sink node of a leaf tensor that requires grad: adds incoming gradients into leaf.grad().
/// It holds the leaf weakly, so a graph never keeps a parameter alive.
class AccumulateGrad final : public Node {
 public:
  /// Node for `leaf` (which must require grad).
  explicit AccumulateGrad(const Tensor& leaf);
  std::string name() const override { return "AccumulateGrad"; }
  /// Adds grad_outputs[0] into the leaf's .grad (allocating it on the first call).
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

/// Base class of every differentiable op. Subclasses implement forward (compute, no graph) and
/// backward (gradients of the inputs), optionally setup_context (save what backward needs).
///
/// @code
/// struct MulFn : Function {
///   std::string name() const override { return "MulBackward"; }
///   std::vector<Tensor> forward(const std::vector<Tensor>& in) override { return {mul_kernel(in[0], in[1])}; }
///   void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override { save_for_backward(in); }
///   std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
///     auto s = saved_tensors(); return {mul_kernel(g[0], s[1]), mul_kernel(g[0], s[0])};
///   }
/// };
/// Tensor y = Function::apply<MulFn>({a, b})[0];
/// @endcode
class Function : public Node {
 public:
  /// Computes the outputs (called with grad mode off).
  virtual std::vector<Tensor> forward(const std::vector<Tensor>& inputs) = 0;
  /// Saves what backward needs; called after forward only when the graph is recorded.
  virtual void setup_context(const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs) {}
  /// Gradients of the inputs from the gradients of the outputs (one per input, undefined allowed).
  virtual std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) = 0;

  /// Creates the op `F(args...)`, runs it on `inputs` and, when needed, records it in the graph.
  template <typename F, typename... Args>
  static std::vector<Tensor> apply(const std::vector<Tensor>& inputs, Args&&... args) {
    auto fn = std::make_shared<F>(std::forward<Args>(args)...);
    return run(fn, inputs);
  }

  /// Node::apply for the engine: checks the gradient count, calls backward(), validates shapes.
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;

 protected:
  /// Keeps tensors for backward without creating reference cycles (saves detached views).
  void save_for_backward(const std::vector<Tensor>& tensors);
  /// The tensors given to save_for_backward, in order.
  const std::vector<Tensor>& saved_tensors() const { return saved_; }
  /// True when input `i` requires a gradient (backward may skip the others).
  bool needs_input_grad(std::size_t i) const;

 private:
  static std::vector<Tensor> run(const std::shared_ptr<Function>& fn,
                                 const std::vector<Tensor>& inputs);
  std::vector<Tensor> saved_;
  std::vector<Shape> input_shapes_;
  std::vector<bool> needs_input_grad_;
};

/// Computes d(root)/d(leaf) for every leaf reachable from `root` and accumulates into .grad.
/// `grad` is the gradient of root (may be omitted only when root has one element: then 1).
/// Throws tt::Error when root does not require grad, or is not a scalar and no grad is given.
void backward(const Tensor& root, const Tensor& grad = Tensor());

/// Whether operations are recorded (thread-local, on by default).
bool is_grad_enabled();
/// Sets grad mode for this thread.
void set_grad_enabled(bool enabled);

/// RAII guard turning recording off in its scope (restores the previous mode).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Result of gradcheck: ok, and the worst disagreement found.
struct GradcheckResult {
  bool ok = true;            ///< every analytic gradient matched
  double max_abs_err = 0;    ///< largest |analytic - numeric|
  double max_rel_err = 0;    ///< largest relative error
  std::string message;       ///< first mismatch: input, index, both values
};

/// Compares backward() with central finite differences,
/// \f$ \partial f/\partial x_i \approx (f(x+\epsilon e_i) - f(x-\epsilon e_i)) / 2\epsilon \f$,
/// for every element of every float64 input that requires grad. `fn` maps the inputs to one
/// output tensor; the check uses the scalar sum(output * w) with a fixed random w.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-8, double rtol = 1e-6);

}  // namespace tt::autograd
