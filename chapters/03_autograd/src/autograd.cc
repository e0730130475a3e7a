// Chapter 03, given code: graph nodes and their lifetime, grad mode, and the bookkeeping of
// Function (saved tensors, gradient checks around backward()). The exercises are in
// function.cc (recording, AccumulateGrad), engine.cc (the backward pass) and gradcheck.cc.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tt/autograd.h"

namespace tt::autograd {

// ----- Node ------------------------------------------------------------------------------------

namespace {
std::atomic<int64_t> g_live_nodes{0};
thread_local bool g_grad_enabled = true;
// Gradient-accumulation fusion: on unless TT_GRAD_ACCUM_FUSION=0 (read once, at start-up).
std::atomic<bool> g_accum_fusion{[] {
  const char* env = std::getenv("TT_GRAD_ACCUM_FUSION");
  return env == nullptr || std::strcmp(env, "0") != 0;
}()};

// "[2, 3] float64 on cpu": the geometry named in gradient errors.
std::string meta_str(const Shape& shape, DType dtype, Device device) {
  return detail::str(shape, " ", dtype_name(dtype), " on ", device.str());
}
}  // namespace

Node::Node() {
  g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}

Node::~Node() {
  g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
  // Dropping next_edges_ normally would destroy the producer, whose destructor drops its own
  // producer, and so on: one nested call per node of a chain. Instead, take over the edges of
  // every node we hold the last reference to, so each one dies with no edges left.
  std::vector<std::shared_ptr<Node>> pending;
  for (Edge& e : next_edges_) {
    if (e.node) pending.push_back(std::move(e.node));
  }
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    if (node.use_count() == 1) {
      for (Edge& e : node->next_edges_) {
        if (e.node) pending.push_back(std::move(e.node));
      }
    }
  }  // `node` is released here, without edges: no recursion
}

int64_t Node::live_count() {
  return g_live_nodes.load(std::memory_order_relaxed);
}

// ----- grad mode -------------------------------------------------------------------------------

bool is_grad_enabled() {
  return g_grad_enabled;
}
void set_grad_enabled(bool enabled) {
  g_grad_enabled = enabled;
}

bool grad_accumulation_fusion_enabled() {
  return g_accum_fusion.load(std::memory_order_relaxed);
}
void set_grad_accumulation_fusion_enabled(bool enabled) {
  g_accum_fusion.store(enabled, std::memory_order_relaxed);
}

// ----- AccumulateGrad --------------------------------------------------------------------------

AccumulateGrad::AccumulateGrad(const Tensor& leaf) : leaf_(leaf.impl()) {
  TT_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(),
           "AccumulateGrad: expected a leaf tensor that requires grad, got ",
           leaf.defined() ? leaf.describe() : std::string("an undefined tensor"));
  set_num_outputs(1);
}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grad_outputs) {
  TT_CHECK(grad_outputs.size() == 1, "AccumulateGrad: expected 1 gradient, got ",
           grad_outputs.size());
  accumulate(grad_outputs[0]);
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf || !leaf->autograd || !leaf->autograd->post_accumulate_grad_hooks) return {};
  if (!PostAccumulateGradScope::last_sink_ran(leaf.get())) return {};
  // A copy: a hook may register or remove hooks (its own included) while they run.
  const auto hooks = leaf->autograd->post_accumulate_grad_hooks->hooks;
  for (const auto& entry : hooks) entry.second(leaf->autograd->grad);
  return {};
}

Tensor AccumulateGrad::accumulation_target() const {
  if (!grad_accumulation_fusion_enabled()) return {};
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf || !leaf->autograd || !PostAccumulateGradScope::sole_sink(leaf.get())) return {};
  const Tensor& grad = leaf->autograd->grad;
  // What accumulate() would add into in place: anything else keeps the old path.
  if (!grad.defined() || !grad.is_contiguous() || grad.shape() != leaf->shape ||
      grad.dtype() != leaf->dtype || grad.device() != leaf->storage->device()) {
    return {};
  }
  return grad;
}

// ----- post-accumulate-grad hooks --------------------------------------------------------------

namespace {
thread_local PostAccumulateGradScope* g_hook_scope = nullptr;
}  // namespace

RemovableHandle::RemovableHandle(RemovableHandle&& other) noexcept
    : hooks_(std::move(other.hooks_)), id_(other.id_) {
  other.id_ = -1;
}

RemovableHandle& RemovableHandle::operator=(RemovableHandle&& other) noexcept {
  if (this != &other) {
    remove();
    hooks_ = std::move(other.hooks_);
    id_ = other.id_;
    other.id_ = -1;
  }
  return *this;
}

void RemovableHandle::remove() {
  if (auto hooks = hooks_.lock()) {
    std::erase_if(hooks->hooks, [this](const auto& entry) { return entry.first == id_; });
  }
  hooks_.reset();
  id_ = -1;
}

RemovableHandle register_post_accumulate_grad_hook(const Tensor& leaf,
                                                   PostAccumulateGradHook hook) {
  TT_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(),
           "register_post_accumulate_grad_hook: expected a leaf tensor that requires grad, got ",
           leaf.defined() ? leaf.describe() : std::string("an undefined tensor"));
  TT_CHECK(hook != nullptr, "register_post_accumulate_grad_hook: the hook is empty (",
           leaf.describe(), ")");
  AutogradMeta& meta = *leaf.impl()->autograd;  // set: the leaf requires grad
  if (!meta.post_accumulate_grad_hooks) {
    meta.post_accumulate_grad_hooks = std::make_shared<PostAccumulateGradHooks>();
  }
  PostAccumulateGradHooks& hooks = *meta.post_accumulate_grad_hooks;
  const int64_t id = hooks.next_id++;
  hooks.hooks.emplace_back(id, std::move(hook));
  return RemovableHandle(meta.post_accumulate_grad_hooks, id);
}

PostAccumulateGradScope::PostAccumulateGradScope(
    const std::unordered_map<const Node*, int>& dependencies)
    : previous_(g_hook_scope) {
  for (const auto& entry : dependencies) {
    const auto* sink = dynamic_cast<const AccumulateGrad*>(entry.first);
    if (sink == nullptr) continue;
    std::shared_ptr<TensorImpl> leaf = sink->leaf();
    if (!leaf) continue;
    ++sinks_[leaf.get()];
    if (leaf->autograd && leaf->autograd->post_accumulate_grad_hooks) ++remaining_[leaf.get()];
  }
  g_hook_scope = this;
}

PostAccumulateGradScope::~PostAccumulateGradScope() {
  g_hook_scope = previous_;
}

bool PostAccumulateGradScope::last_sink_ran(const TensorImpl* leaf) {
  if (g_hook_scope == nullptr) return true;
  auto it = g_hook_scope->remaining_.find(leaf);
  if (it == g_hook_scope->remaining_.end()) return true;  // hooked during this backward
  return --it->second == 0;
}

bool PostAccumulateGradScope::sole_sink(const TensorImpl* leaf) {
  if (g_hook_scope == nullptr) return false;  // not inside backward()
  auto it = g_hook_scope->sinks_.find(leaf);
  return it != g_hook_scope->sinks_.end() && it->second == 1;
}

// ----- Function --------------------------------------------------------------------------------

void Function::record_metadata(const std::vector<Tensor>& inputs,
                               const std::vector<Tensor>& outputs) {
  input_meta_.clear();
  needs_input_grad_.clear();
  for (const Tensor& t : inputs) {
    input_meta_.push_back({t.shape(), t.dtype(), t.device()});
    needs_input_grad_.push_back(t.requires_grad());
  }
  output_meta_.clear();
  for (const Tensor& t : outputs) output_meta_.push_back({t.shape(), t.dtype(), t.device()});
}

std::vector<Tensor> Function::apply(const std::vector<Tensor>& grad_outputs) {
  TT_CHECK(grad_outputs.size() == output_meta_.size(), name(), ": got ", grad_outputs.size(),
           " output gradients for ", output_meta_.size(), " outputs");
  // Missing output gradients become zeros, so backward() never sees an undefined one; when
  // none arrived at all, no input gets a gradient either.
  std::vector<Tensor> grads = grad_outputs;
  bool any = false;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const TensorMeta& m = output_meta_[i];
    if (!grads[i].defined()) {
      grads[i] = zeros(m.shape, {m.dtype, m.device});
      continue;
    }
    any = true;
    TT_CHECK(
        grads[i].shape() == m.shape && grads[i].dtype() == m.dtype && grads[i].device() == m.device,
        name(), ": the gradient of output ", i, " is ", grads[i].describe(), ", expected ",
        meta_str(m.shape, m.dtype, m.device));
  }
  if (!any) return std::vector<Tensor>(input_meta_.size());

  std::vector<Tensor> result = backward(grads);
  TT_CHECK(result.size() == input_meta_.size(), name(), "::backward returned ", result.size(),
           " gradients for ", input_meta_.size(), " inputs");
  for (std::size_t i = 0; i < result.size(); ++i) {
    if (!needs_input_grad_[i]) {
      result[i] = Tensor();  // nobody receives it
      continue;
    }
    if (!result[i].defined()) continue;
    const TensorMeta& m = input_meta_[i];
    TT_CHECK(result[i].shape() == m.shape && result[i].dtype() == m.dtype &&
                 result[i].device() == m.device,
             name(), "::backward returned ", result[i].describe(), " as the gradient of input ", i,
             ", which is ", meta_str(m.shape, m.dtype, m.device));
  }
  return result;
}

void Function::release_saved() {
  saved_.clear();
  saved_.shrink_to_fit();
  released_ = true;
}

void Function::save_for_backward(const std::vector<Tensor>& tensors) {
  saved_.clear();
  // A detached view shares the data but not the autograd state: saving an output of this very
  // Function as a plain handle would make output -> grad_fn (this) -> saved output a cycle.
  for (const Tensor& t : tensors) saved_.push_back(t.defined() ? t.detach() : Tensor());
}

const std::vector<Tensor>& Function::saved_tensors() const {
  TT_CHECK(!released_, name(),
           ": trying to backward through the graph a second time; the saved tensors were freed "
           "after the first backward (pass retain_graph = true to the first backward)");
  return saved_;
}

Tensor Function::accumulation_target(std::size_t i) const {
  if (i >= needs_input_grad_.size() || !needs_input_grad_[i] || i >= next_edges().size()) return {};
  const auto* sink = dynamic_cast<const AccumulateGrad*>(next_edges()[i].node.get());
  return sink != nullptr ? sink->accumulation_target() : Tensor();
}

bool Function::needs_input_grad(std::size_t i) const {
  TT_CHECK(i < needs_input_grad_.size(), name(), ": needs_input_grad(", i, ") but the op has ",
           needs_input_grad_.size(), " inputs");
  return needs_input_grad_[i];
}

}  // namespace tt::autograd
