// Chapter 03 exercises ch03.3 and ch03.4: recording the graph, and the leaf's gradient sink.
#include <utility>

#include "tt/autograd.h"
#include "tt/ops.h"
#include "tt/todo.h"

namespace tt::autograd {

Edge gradient_edge(const Tensor& t) {
#if TT_SOLUTION
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  return {std::make_shared<AccumulateGrad>(t), 0};
#else
  TT_TODO(
      "ch03.3",
      "gradient_edge: where t's gradient goes: no edge unless t requires grad; {grad_fn, output_nr} for a computed tensor; a new AccumulateGrad sink for a leaf");
#endif
}

std::vector<Tensor> Function::run(const std::shared_ptr<Function>& fn,
                                  const std::vector<Tensor>& inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TT_CHECK(inputs[i].defined(), fn->name(), ": input ", i, " is an undefined tensor");
  }
#if TT_SOLUTION
  bool record = false;
  if (is_grad_enabled()) {
    for (const Tensor& t : inputs) record = record || t.requires_grad();
  }
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;  // forward computes values only; nothing inside it is recorded
    outputs = fn->forward(inputs);
  }
  for (Tensor& out : outputs) {
    TT_CHECK(out.defined(), fn->name(), "::forward returned an undefined tensor");
    // An output that is one of the inputs (an identity op) must become a new tensor: giving it
    // a grad_fn would rewrite the input's history.
    for (const Tensor& in : inputs) {
      if (out.is_same(in)) out = out.detach();
    }
  }
  if (!record) return outputs;  // fn is released here: no graph

  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  fn->set_next_edges(std::move(edges));
  fn->set_num_outputs(static_cast<uint32_t>(outputs.size()));
  fn->record_metadata(inputs, outputs);
  fn->setup_context(inputs, outputs);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].set_grad_fn(fn, static_cast<uint32_t>(i));
  }
  return outputs;
#else
  TT_TODO(
      "ch03.3",
      "Function::run: fn->forward(inputs) computed with grad mode off; when grad mode is on and an input requires grad, fn becomes the grad_fn of every output (output i in slot i) with one edge per input and its context saved; no input ever gets a new grad_fn");
#endif
}

void AccumulateGrad::accumulate(const Tensor& g) {
#if TT_SOLUTION
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!g.defined() || !leaf) return;
  TT_CHECK(
      g.shape() == leaf->shape && g.dtype() == leaf->dtype && g.device() == leaf->storage->device(),
      "AccumulateGrad: gradient ", g.describe(), " does not match the leaf's shape ", leaf->shape,
      ", dtype ", dtype_name(leaf->dtype), " and device ", leaf->storage->device().str());
  if (!leaf->autograd) leaf->autograd = std::make_unique<AutogradMeta>();
  Tensor& grad = leaf->autograd->grad;
  if (!grad.defined()) {
    // A private copy: g may be shared (an add's backward hands the same tensor to both inputs),
    // and accumulating in place into a shared tensor would change the other one too.
    grad = g.clone();
  } else if (grad.is_contiguous() && grad.dtype() == g.dtype() && grad.device() == g.device()) {
    // In place, so .grad keeps its identity across backward calls (optimizers may hold it).
    call_kernel<BinaryKernel>("add", grad.device(), grad, grad, g);
  } else {
    grad = binary_op("add", grad, g);  // a .grad set by hand with another layout (or a clear error)
  }
#else
  TT_TODO(
      "ch03.4",
      "AccumulateGrad::accumulate: adds the incoming gradient into the leaf's .grad (the first one stored as a private copy, later ones added in place); nothing when the leaf is gone or the gradient undefined; throws when shape, dtype or device differ from the leaf's");
#endif
}

}  // namespace tt::autograd
