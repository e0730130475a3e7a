// Optimizer base class (groups, state, step counter, state dict), SGD and AdamW front-ends.
// The updates themselves are the kernels "sgd_step" and "adamw_step" (optim_kernels.cc).
#include <cmath>
#include <map>
#include <unordered_set>
#include <utility>

#include "tt/optim.h"

namespace tt::optim {

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, double lr,
                     std::vector<std::string> state_names)
    : name_(std::move(name)), groups_(std::move(groups)), state_names_(std::move(state_names)) {
  TT_CHECK(std::isfinite(lr) && lr >= 0, name_, ": learning rate must be finite and >= 0, got ",
           lr);
  std::unordered_set<const TensorImpl*> seen;
  int64_t index = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    TT_CHECK(std::isfinite(group.weight_decay) && group.weight_decay >= 0, name_,
             ": weight_decay of parameter group ", g, " must be finite and >= 0, got ",
             group.weight_decay);
    for (const Tensor& p : group.params) {
      TT_CHECK(p.defined(), name_, ": parameter ", index, " is undefined");
      TT_CHECK(is_floating(p.dtype()) && p.is_contiguous() && p.is_leaf(), name_, ": parameter ",
               index, " must be a contiguous float32/float64 leaf, got ", p.describe());
      TT_CHECK(seen.insert(p.impl().get()).second, name_, ": parameter ", index, " (", p.describe(),
               ") appears twice (pass module.parameters(), which lists tied weights once)");
      std::vector<Tensor> state;
      for (std::size_t k = 0; k < state_names_.size(); ++k) state.push_back(zeros_like(p));
      state_.push_back(std::move(state));
      ++index;
    }
  }
  step_ = scalar_tensor(0, {.dtype = DType::kInt64});
  lr_ = scalar_tensor(lr, {.dtype = DType::kFloat64});
}

double Optimizer::lr() const {
  return lr_.data<double>()[0];
}

void Optimizer::set_lr(double lr) {
  TT_CHECK(std::isfinite(lr) && lr >= 0, name_,
           "::set_lr: learning rate must be finite and >= 0, got ", lr);
  lr_.data<double>()[0] = lr;
}

int64_t Optimizer::step_count() const {
  return step_.data<int64_t>()[0];
}

void Optimizer::step() {
  skip_ = Tensor();
  step_impl();
}

void Optimizer::step_unless(const Tensor& skip) {
  TT_CHECK(skip.defined() && skip.numel() == 1 && skip.dtype() == DType::kFloat64, name_,
           "::step_unless: skip must be a one-element float64 tensor, got ",
           skip.defined() ? skip.describe() : std::string("an undefined tensor"));
  skip_ = skip;
  try {
    step_impl();
  } catch (...) {
    skip_ = Tensor();
    throw;
  }
  skip_ = Tensor();
}

void Optimizer::rewind_step_count() {
  TT_CHECK(step_count() > 0, name_, "::rewind_step_count: no step to take back");
  step_.data<int64_t>()[0] = step_count() - 1;
}

void Optimizer::step_impl() {
  const int64_t t = step_count() + 1;
  // The parameters of one group that have a gradient, batched per device (one kernel call each).
  struct Batch {
    std::vector<Tensor> params, grads;
    std::vector<std::vector<Tensor>> state;
  };
  std::size_t flat = 0;
  for (const ParamGroup& group : groups_) {
    std::map<std::pair<int, int>, Batch> batches;
    for (const Tensor& p : group.params) {
      const std::size_t i = flat++;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      TT_CHECK(g.shape() == p.shape() && g.dtype() == p.dtype() && g.device() == p.device(), name_,
               "::step: the gradient of parameter ", i, " (", g.describe(),
               ") does not match the parameter (", p.describe(), ")");
      if (!g.is_contiguous()) g = g.contiguous();
      nn::move_to_device_(state_[i], p.device());  // a no-op unless the model moved
      Batch& b = batches[{static_cast<int>(p.device().type), p.device().index}];
      b.params.push_back(p);
      b.grads.push_back(g);
      b.state.resize(state_names_.size());
      for (std::size_t k = 0; k < state_names_.size(); ++k) b.state[k].push_back(state_[i][k]);
    }
    for (const auto& [device, b] : batches) {
      update(b.params, b.grads, b.state, group.weight_decay, t);
    }
  }
  step_.data<int64_t>()[0] = t;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const ParamGroup& group : groups_) nn::zero_grad_(group.params, set_to_none);
}

void Optimizer::to(Device device) {
  for (const auto& state : state_) nn::move_to_device_(state, device);
}

StateDict Optimizer::state_dict() const {
  StateDict out = {{"step", step_}, {"lr", lr_}};
  for (std::size_t i = 0; i < state_.size(); ++i) {
    for (std::size_t k = 0; k < state_names_.size(); ++k) {
      out.emplace_back("state." + std::to_string(i) + "." + state_names_[k], state_[i][k]);
    }
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& state, const std::string& source) {
  nn::apply_state_dict(state_dict(), state, source);
}

// ----- SGD ---------------------------------------------------------------------------------

namespace {

std::vector<ParamGroup> one_group(std::vector<Tensor> params, double weight_decay) {
  return {ParamGroup{std::move(params), weight_decay}};
}

std::vector<std::string> sgd_state(const SgdOptions& o) {
  TT_CHECK(
      std::isfinite(o.momentum) && o.momentum >= 0 && std::isfinite(o.weight_decay) &&
          o.weight_decay >= 0 && std::isfinite(o.dampening),
      "SGD: momentum and weight_decay must be finite and >= 0, dampening finite; got momentum ",
      o.momentum, ", weight_decay ", o.weight_decay, ", dampening ", o.dampening);
  TT_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
           "SGD: Nesterov momentum requires momentum > 0 and dampening = 0");
  if (o.momentum == 0) return {};
  return {"momentum_buffer"};
}

std::vector<std::string> adamw_state(const AdamWOptions& o) {
  TT_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
           "AdamW: betas must be in [0, 1), got (", o.beta1, ", ", o.beta2, ")");
  TT_CHECK(
      std::isfinite(o.eps) && o.eps >= 0 && std::isfinite(o.weight_decay) && o.weight_decay >= 0,
      "AdamW: eps and weight_decay must be finite and >= 0, got eps ", o.eps, ", weight_decay ",
      o.weight_decay);
  return {"exp_avg", "exp_avg_sq"};
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SgdOptions options)
    : SGD(one_group(std::move(params), options.weight_decay), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SgdOptions options)
    : Optimizer("SGD", std::move(groups), options.lr, sgd_state(options)), options_(options) {}

void SGD::update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<std::vector<Tensor>>& state, double weight_decay, int64_t step) {
  TT_CHECK(!skip().defined(), "SGD::step_unless: SGD has no skipping kernel; use step()");
  const SgdStepArgs args{lr(),         options_.momentum, options_.dampening,
                         weight_decay, options_.nesterov, step == 1};
  static const std::vector<Tensor> no_buffers;
  call_kernel<SgdStepKernel>("sgd_step", params[0].device(), params, grads,
                             state.empty() ? no_buffers : state[0], args);
}

// ----- AdamW -------------------------------------------------------------------------------

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(one_group(std::move(params), options.weight_decay), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer("AdamW", std::move(groups), options.lr, adamw_state(options)), options_(options) {}

void AdamW::update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<std::vector<Tensor>>& state, double weight_decay,
                   int64_t step) {
  const AdamWStepArgs args{lr(), options_.beta1, options_.beta2, options_.eps, weight_decay, step};
  if (skip().defined()) {
    TT_CHECK(skip().device() == params[0].device(), "AdamW::step_unless: skip ", skip().describe(),
             " must be on the parameters' device ", params[0].device().str());
    call_kernel<AdamWStepUnlessKernel>("adamw_step_unless", params[0].device(), params, grads,
                                       state[0], state[1], args, skip());
    return;
  }
  call_kernel<AdamWStepKernel>("adamw_step", params[0].device(), params, grads, state[0], state[1],
                               args);
}

}  // namespace tt::optim
