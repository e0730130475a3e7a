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
#include <unordered_map>
#include <utility>
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
  /// Frees the graph behind this node iteratively, so that dropping the last tensor of a
  /// 100,000-op chain does not recurse 100,000 destructor calls deep.
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Op name for messages and graph printing, e.g. "AddBackward".
  virtual std::string name() const = 0;
  /// Given one gradient per output (an undefined Tensor where an output got no gradient),
  /// returns one gradient per input (undefined where not needed).
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  /// Drops what only backward needed (saved tensors); the engine calls it after apply() unless
  /// the graph is retained. The default has nothing to free.
  virtual void release_saved() {}
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
  /// Node for `leaf` (which must be a leaf that requires grad); it has one gradient slot.
  explicit AccumulateGrad(const Tensor& leaf);
  /// "AccumulateGrad".
  std::string name() const override { return "AccumulateGrad"; }
  /// Checks that exactly one gradient arrived, accumulate()s it, then runs the leaf's
  /// post-accumulate-grad hooks when this was the leaf's last sink of the current backward
  /// (see register_post_accumulate_grad_hook). Returns no gradients (a sink).
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  /// Adds `grad` into the leaf's .grad (exercise ch03.4): the first gradient is stored as a
  /// private copy, later ones are added into it in place. Nothing happens when the gradient is
  /// undefined or the leaf no longer exists.
  void accumulate(const Tensor& grad);
  /// The leaf (null once it no longer exists).
  std::shared_ptr<TensorImpl> leaf() const { return leaf_.lock(); }
  /// Gradient-accumulation fusion: the leaf's .grad when the op that produces this sink's
  /// gradient may add that gradient into .grad itself (in place, e.g. a GEMM with beta = 1) and
  /// return an undefined gradient instead; undefined when it may not. Defined only when every
  /// condition of Function::accumulation_target holds. apply() then receives no gradient and
  /// still runs the leaf's hooks, which see the accumulated .grad.
  Tensor accumulation_target() const;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

/// A post-accumulate-grad hook: called with the leaf's .grad once it is final for the current
/// backward (undefined when no gradient has ever reached the leaf).
using PostAccumulateGradHook = std::function<void(const Tensor& grad)>;

/// The hooks of one leaf (kept in its AutogradMeta; use register_post_accumulate_grad_hook).
struct PostAccumulateGradHooks {
  /// (id, hook) in registration order; ids are never reused.
  std::vector<std::pair<int64_t, PostAccumulateGradHook>> hooks;
  /// Id of the next hook registered.
  int64_t next_id = 0;
};

/// Owns one registered hook: remove() (or the destructor) unregisters it. Movable, not
/// copyable; a default-constructed handle owns nothing.
class RemovableHandle {
 public:
  /// A handle that owns no hook.
  RemovableHandle() = default;
  /// The handle of hook `id` in `hooks`.
  RemovableHandle(std::weak_ptr<PostAccumulateGradHooks> hooks, int64_t id)
      : hooks_(std::move(hooks)), id_(id) {}
  /// Unregisters the hook (remove()).
  ~RemovableHandle() { remove(); }
  /// Takes over `other`'s hook.
  RemovableHandle(RemovableHandle&& other) noexcept;
  /// Unregisters this handle's hook, then takes over `other`'s.
  RemovableHandle& operator=(RemovableHandle&& other) noexcept;
  RemovableHandle(const RemovableHandle&) = delete;
  RemovableHandle& operator=(const RemovableHandle&) = delete;
  /// Unregisters the hook; nothing when already removed or when the leaf is gone.
  void remove();

 private:
  std::weak_ptr<PostAccumulateGradHooks> hooks_;
  int64_t id_ = -1;
};

/// Registers `hook` on `leaf` (a leaf tensor that requires grad) and returns the handle that
/// keeps it registered (PyTorch's Tensor.register_post_accumulate_grad_hook). In every
/// backward() that reaches the leaf, the hook runs once, right after the leaf's last
/// AccumulateGrad node of that backward has run, i.e. when .grad has received every
/// contribution of this backward (a leaf used k times has k sinks: the hook waits for all k).
/// Leaves therefore see their hooks in the order the engine finishes them: for a chain of
/// layers, the reverse of the order of use in forward. Hooks of one leaf run in registration
/// order. Distributed data parallelism uses this to start a bucket's all-reduce while backward
/// still runs (chapter 12). Outside backward() (run_backward or AccumulateGrad::apply called
/// directly) the hooks run after every accumulation. Not thread-safe: register, remove and
/// run backward from one thread.
[[nodiscard]] RemovableHandle register_post_accumulate_grad_hook(const Tensor& leaf,
                                                                 PostAccumulateGradHook hook);

/// The bookkeeping that makes post-accumulate-grad hooks fire once per backward (given code;
/// backward() creates one around run_backward): counts, for every leaf with hooks, how many of
/// the leaf's AccumulateGrad nodes are reachable, so AccumulateGrad::apply knows which one is
/// the last. Scopes nest (a hook may run another backward); the innermost one is active.
class PostAccumulateGradScope {
 public:
  /// Counts the AccumulateGrad nodes among the keys of `dependencies`
  /// (compute_dependencies' result), per leaf.
  explicit PostAccumulateGradScope(const std::unordered_map<const Node*, int>& dependencies);
  /// Restores the enclosing scope.
  ~PostAccumulateGradScope();
  PostAccumulateGradScope(const PostAccumulateGradScope&) = delete;
  PostAccumulateGradScope& operator=(const PostAccumulateGradScope&) = delete;
  /// Called by AccumulateGrad::apply after `leaf` accumulated: true when this was its last sink
  /// of the active scope, or when no scope knows the leaf.
  static bool last_sink_ran(const TensorImpl* leaf);
  /// True inside a backward() (a scope is active) whose graph reaches exactly one
  /// AccumulateGrad node of `leaf`: the condition under which gradient-accumulation fusion
  /// leaves the order of the additions into .grad unchanged (AccumulateGrad::accumulation_target).
  static bool sole_sink(const TensorImpl* leaf);

 private:
  std::unordered_map<const TensorImpl*, int> remaining_;
  std::unordered_map<const TensorImpl*, int> sinks_;  // every leaf's sinks in this graph
  PostAccumulateGradScope* previous_;
};

/// Base class of every differentiable op. Subclasses implement forward (compute, no graph) and
/// backward (gradients of the inputs), optionally setup_context (save what backward needs).
///
/// @code
/// struct MulFn : Function {
///   std::string name() const override { return "MulBackward"; }
///   std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
///     return {binary_op("mul", in[0], in[1])};
///   }
///   void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
///     save_for_backward(in);
///   }
///   std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
///     const auto& s = saved_tensors();
///     return {binary_op("mul", g[0], s[1]), binary_op("mul", g[0], s[0])};
///   }
/// };
/// Tensor y = Function::apply<MulFn>({a, b})[0];
/// @endcode
class Function : public Node {
 public:
  /// Computes the outputs (called with grad mode off).
  virtual std::vector<Tensor> forward(const std::vector<Tensor>& inputs) = 0;
  /// Saves what backward needs; called after forward only when the graph is recorded.
  virtual void setup_context(const std::vector<Tensor>& /*inputs*/,
                             const std::vector<Tensor>& /*outputs*/) {}
  /// Gradients of the inputs from the gradients of the outputs (one per input, undefined allowed
  /// for inputs that need none). Every grad_outputs[i] is defined: an output that received no
  /// gradient gets zeros of its shape.
  virtual std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) = 0;

  /// Creates the op `F(args...)`, runs it on `inputs` and, when needed, records it in the graph.
  template <typename F, typename... Args>
  static std::vector<Tensor> apply(const std::vector<Tensor>& inputs, Args&&... args) {
    auto fn = std::make_shared<F>(std::forward<Args>(args)...);
    return run(fn, inputs);
  }

  /// Node::apply for the engine: checks the gradient count, replaces missing output gradients
  /// by zeros, calls backward() and validates the count, shapes and dtypes it returns.
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  /// Frees the saved tensors; a later backward() through this node throws.
  void release_saved() override;

 protected:
  /// Keeps tensors for backward without creating reference cycles (saves detached views).
  void save_for_backward(const std::vector<Tensor>& tensors);
  /// The tensors given to save_for_backward, in order; throws once they have been released.
  const std::vector<Tensor>& saved_tensors() const;
  /// True when input `i` requires a gradient (backward may skip the others).
  bool needs_input_grad(std::size_t i) const;
  /// Gradient-accumulation fusion (Megatron-LM's gradient_accumulation_fusion): the tensor into
  /// which backward() may accumulate the gradient of input `i` itself, or an undefined tensor.
  /// When it is defined, backward() must ADD input i's gradient into it in place (e.g. the
  /// weight-gradient GEMM with beta = 1: .grad = dy^T x + .grad) and return an undefined
  /// gradient for input i; the engine then has nothing to add, which saves a read of the new
  /// gradient and a read and a write of .grad per backward. Defined only when all hold:
  /// - grad_accumulation_fusion_enabled() and a backward() is running (not a direct
  ///   run_backward or Node::apply call);
  /// - input i needs a gradient and is a leaf (its edge is an AccumulateGrad node), the leaf
  ///   still exists and this graph reaches exactly one AccumulateGrad node of it (a leaf used
  ///   twice keeps the old path, so the order of the additions never changes);
  /// - the leaf's .grad is defined (a first gradient is still stored by AccumulateGrad as a
  ///   private copy), contiguous, and of the leaf's shape, dtype and device: exactly the case in
  ///   which AccumulateGrad::accumulate would add in place.
  ///
  /// The leaf's post-accumulate-grad hooks still run once, after its AccumulateGrad node, with
  /// the accumulated .grad. An op that cannot fuse (another dtype, a fallback kernel) simply
  /// returns its gradient as before.
  Tensor accumulation_target(std::size_t i) const;

 private:
  /// What Function::apply checks gradients against: the geometry of one input or output.
  struct TensorMeta {
    Shape shape;    ///< sizes
    DType dtype;    ///< element type
    Device device;  ///< where it lives
  };
  /// Runs forward and records the graph (exercise ch03.3).
  static std::vector<Tensor> run(const std::shared_ptr<Function>& fn,
                                 const std::vector<Tensor>& inputs);
  /// Remembers the input/output geometry and which inputs need a gradient (given code).
  void record_metadata(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
  std::vector<Tensor> saved_;
  bool released_ = false;
  std::vector<TensorMeta> input_meta_;
  std::vector<TensorMeta> output_meta_;
  std::vector<bool> needs_input_grad_;
};

/// The edge a gradient for `t` must follow (exercise ch03.3): {t.grad_fn(), t.output_nr()} for
/// a recorded result, a new AccumulateGrad node for a leaf that requires grad, and an empty edge
/// (node == nullptr) for a tensor that needs no gradient.
Edge gradient_edge(const Tensor& t);

/// For every node reachable from `root` (root included), the number of edges from reachable
/// nodes that point to it: how many gradients the engine must collect before running it
/// (exercise ch03.1). Iterative, so any depth works.
std::unordered_map<const Node*, int> compute_dependencies(const Node& root);

/// The engine loop (exercise ch03.2): starts with `grad` in slot root.input_nr of root.node,
/// runs every node whose dependency count has dropped to zero from a work queue, sums the
/// gradients arriving at the same slot, and calls release_saved() on each node after it ran
/// unless `retain_graph`. `dependencies` comes from compute_dependencies(*root.node).
void run_backward(const Edge& root, const Tensor& grad,
                  std::unordered_map<const Node*, int> dependencies, bool retain_graph = false);

/// Computes \f$ \sum_j g_j\, \partial\, \mathrm{root}_j / \partial\, \mathrm{leaf} \f$ (a
/// vector-Jacobian product with g = `grad`) for every leaf that requires grad and is reachable
/// from `root`, and accumulates it into the leaf's .grad. `grad` may be omitted only when root
/// has one element (then g = 1). The saved tensors of the graph are freed afterwards unless
/// `retain_graph`. Throws tt::Error when root does not require grad, is not a one-element
/// tensor and no grad is given, or when grad's shape, dtype or device differs from root's.
void backward(const Tensor& root, const Tensor& grad = Tensor(), bool retain_graph = false);

/// Whether ops may accumulate leaf gradients straight into .grad (Function::accumulation_target).
/// On by default; the environment variable TT_GRAD_ACCUM_FUSION=0 turns it off at start-up, to
/// compare the fused and unfused paths (the gradients are equal, see the chapter README).
bool grad_accumulation_fusion_enabled();
/// Turns gradient-accumulation fusion on or off (process-wide).
void set_grad_accumulation_fusion_enabled(bool enabled);

/// RAII guard setting gradient-accumulation fusion on or off in its scope (restores the
/// previous setting).
class GradAccumulationFusionGuard {
 public:
  /// Sets fusion to `enabled` until the guard dies.
  explicit GradAccumulationFusionGuard(bool enabled) : prev_(grad_accumulation_fusion_enabled()) {
    set_grad_accumulation_fusion_enabled(enabled);
  }
  ~GradAccumulationFusionGuard() { set_grad_accumulation_fusion_enabled(prev_); }
  GradAccumulationFusionGuard(const GradAccumulationFusionGuard&) = delete;
  GradAccumulationFusionGuard& operator=(const GradAccumulationFusionGuard&) = delete;

 private:
  bool prev_;
};

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
  bool ok = true;          ///< every analytic gradient matched
  double max_abs_err = 0;  ///< largest |analytic - numeric|
  double max_rel_err = 0;  ///< largest |analytic - numeric| / max(|numeric|, atol)
  std::string message;     ///< first mismatch: input, index, both values
};

/// A function of tensors to one tensor, as gradcheck takes it.
using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// The vector-Jacobian product \f$ w^T J \f$ of `fn` at `inputs` by central finite differences
/// (exercise ch03.5): for each element i of each input k with requires_grad() (undefined
/// entries for the others), \f$ (\langle f(x+\epsilon e_i), w\rangle - \langle f(x-\epsilon
/// e_i), w\rangle) / 2\epsilon \f$. Inputs, output and `w` are float64; `fn` is evaluated
/// with grad mode off on perturbed copies, so `inputs` are left unchanged.
std::vector<Tensor> numerical_vjp(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                  const Tensor& w, double eps = 1e-6);

/// Compares backward() with central finite differences,
/// \f$ \partial f/\partial x_i \approx (f(x+\epsilon e_i) - f(x-\epsilon e_i)) / 2\epsilon \f$,
/// for every element of every float64 input that requires grad. `fn` maps the inputs to one
/// output tensor; the check uses the scalar sum(output * w) with a fixed random w (seeded), so
/// it compares backward(fn(x), w) with numerical_vjp(fn, x, w). An element passes when
/// \f$ |a - n| \le \mathrm{atol} + \mathrm{rtol}\,|n| \f$. The inputs' .grad is not touched.
GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-6, double rtol = 1e-6);

}  // namespace tt::autograd
