// The master-weight AdamW (tt/master_weights.h): the registry of bfloat16 copies behind
// bf16_weight(), MasterWeightAdamW, and the kernels "adamw_step_bf16": the CPU one around
// exercise ch11.5 (master_weights_cpu.cc), the CUDA one around chapter 07's AdamW launch.
#include "tt/master_weights.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "tt/dispatcher.h"
#include "tt/fused_optim.h"  // cuda::adamw_step_with_copies

namespace tt {

/// One parameter's copy: kept once bf16_weight() asked for it, allocated by the next step.
struct MasterWeightAdamW::Entry {
  Tensor master;         // the parameter (a handle: same TensorImpl as the model's)
  Tensor copy;           // bfloat16, master's shape, on master's device
  bool wanted = false;   // a layer read it through bf16_weight(): the steps write its copy
  bool current = false;  // written from the master as it is now
};

namespace {

/// The live entries of every MasterWeightAdamW, by parameter.
struct Registry {
  std::mutex mutex;
  std::unordered_map<const TensorImpl*, std::weak_ptr<MasterWeightAdamW::Entry>> entries;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

MasterWeightAdamW::MasterWeightAdamW(std::vector<optim::ParamGroup> groups,
                                     optim::AdamWOptions options)
    : AdamW(std::move(groups), options) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  // The registry holds weak references: if this constructor throws, entries_ dies and every
  // entry registered so far expires with it.
  for (const optim::ParamGroup& group : param_groups()) {
    for (const Tensor& p : group.params) {
      const std::size_t i = entries_.size();
      TT_CHECK(p.dtype() == DType::kFloat32, "MasterWeightAdamW: parameter ", i,
               " must be float32 (a master weight), got ", p.describe());
      std::weak_ptr<Entry>& slot = r.entries[p.impl().get()];
      TT_CHECK(slot.expired(), "MasterWeightAdamW: parameter ", i, " (", p.describe(),
               ") already has bfloat16 copies kept by another MasterWeightAdamW");
      auto e = std::make_shared<Entry>();
      e->master = p;
      slot = e;
      index_[p.impl().get()] = e.get();
      entries_.push_back(std::move(e));
    }
  }
}

MasterWeightAdamW::MasterWeightAdamW(std::vector<Tensor> params, optim::AdamWOptions options)
    : MasterWeightAdamW({optim::ParamGroup{std::move(params), options.weight_decay}}, options) {}

MasterWeightAdamW::~MasterWeightAdamW() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& e : entries_) r.entries.erase(e->master.impl().get());
}

MasterWeightAdamW::Entry* MasterWeightAdamW::find(const Tensor& param) const {
  const auto it = index_.find(param.impl().get());
  return it == index_.end() ? nullptr : it->second;
}

Tensor MasterWeightAdamW::copy_of(const Tensor& param) const {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  if (const Entry* e = find(param)) return e->current ? e->copy : Tensor();
  TT_THROW("MasterWeightAdamW::copy_of: ",
           param.defined() ? param.describe() : std::string("an undefined tensor"),
           " is not one of its parameters");
}

void MasterWeightAdamW::invalidate_copies() {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  for (const auto& e : entries_) e->current = false;
}

void MasterWeightAdamW::update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                               const std::vector<std::vector<Tensor>>& state, double weight_decay,
                               int64_t step) {
  const Device device = params[0].device();
  // Parameters whose copy a layer asked for (bf16_weight) and the others, each with its state.
  std::vector<Tensor> cp, cg, cm, cv, copies, rp, rg, rm, rv;
  std::vector<Entry*> batch;
  {
    const std::lock_guard<std::mutex> lock(registry().mutex);
    for (std::size_t j = 0; j < params.size(); ++j) {
      const Tensor& p = params[j];
      Entry* entry = find(p);
      TT_CHECK(entry != nullptr, "MasterWeightAdamW::step: ", p.describe(), " is not registered");
      if (!entry->wanted) {
        rp.push_back(p), rg.push_back(grads[j]), rm.push_back(state[0][j]);
        rv.push_back(state[1][j]);
        continue;
      }
      if (!entry->copy.defined() || entry->copy.device() != p.device()) {
        entry->copy = empty(p.shape(), {DType::kBFloat16, p.device()});  // first step, or moved
      }
      cp.push_back(p), cg.push_back(grads[j]), cm.push_back(state[0][j]);
      cv.push_back(state[1][j]), copies.push_back(entry->copy);
      batch.push_back(entry);
    }
  }
  if (!rp.empty()) AdamW::update(rp, rg, {rm, rv}, weight_decay, step);  // no copy to write
  if (cp.empty()) return;
  const optim::AdamWStepArgs args{lr(),          options().beta1, options().beta2,
                                  options().eps, weight_decay,    step};
  if (skip().defined()) {
    TT_CHECK(skip().device() == device, "MasterWeightAdamW::step_unless: skip ", skip().describe(),
             " must be on the parameters' device ", device.str());
  }
  call_kernel<AdamWStepBf16Kernel>("adamw_step_bf16", device, cp, cg, cm, cv, copies, args, skip());
  const std::lock_guard<std::mutex> lock(registry().mutex);
  for (Entry* e : batch) e->current = true;
}

Tensor bf16_weight(const Tensor& w) {
  {
    Registry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.entries.find(w.impl().get());
    if (it != r.entries.end()) {
      if (const auto e = it->second.lock(); e != nullptr) {
        if (e->current && e->copy.device() == w.device()) return e->copy;
        e->wanted = true;  // from the next step on, the optimizer writes its copy
      }
    }
  }
  return w.to(DType::kBFloat16);
}

std::unique_ptr<optim::Optimizer> make_master_weight_adamw(std::vector<optim::ParamGroup> groups,
                                                           const optim::AdamWOptions& options) {
  return std::make_unique<MasterWeightAdamW>(std::move(groups), options);
}

namespace {

/// Checks the copies of "adamw_step_bf16" (`op` names the kernel in the message).
void check_copies(const char* op, const std::vector<Tensor>& params,
                  const std::vector<Tensor>& copies) {
  TT_CHECK(copies.size() == params.size(), op, ": ", copies.size(), " copies for ", params.size(),
           " parameters");
  for (std::size_t j = 0; j < params.size(); ++j) {
    TT_CHECK(copies[j].defined() && copies[j].dtype() == DType::kBFloat16 &&
                 copies[j].is_contiguous() && copies[j].numel() == params[j].numel() &&
                 copies[j].device() == params[j].device(),
             op, ": copies[", j, "] must be a contiguous bfloat16 tensor of ", params[j].describe(),
             "'s size and device, got ",
             copies[j].defined() ? copies[j].describe() : std::string("an undefined tensor"));
  }
}

}  // namespace

namespace cpu {

void adamw_step_bf16(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                     const std::vector<Tensor>& copies, const optim::AdamWStepArgs& args,
                     const Tensor& skip) {
  check_copies("cpu::adamw_step_bf16", params, copies);
  adamw_master_update(params, grads, exp_avgs, exp_avg_sqs, copies, args, skip);
}

}  // namespace cpu

TT_REGISTER_KERNEL("adamw_step_bf16", DeviceType::kCPU, cpu::adamw_step_bf16);

#if TT_WITH_CUDA
namespace cuda {

void adamw_step_bf16(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                     const std::vector<Tensor>& copies, const optim::AdamWStepArgs& args,
                     const Tensor& skip) {
  check_copies("cuda::adamw_step_bf16", params, copies);
  if (params.empty()) return;
  adamw_step_with_copies(params, grads, exp_avgs, exp_avg_sqs, copies, args, skip);
}

}  // namespace cuda

TT_REGISTER_KERNEL("adamw_step_bf16", DeviceType::kCUDA, cuda::adamw_step_bf16);
#endif  // TT_WITH_CUDA

}  // namespace tt
