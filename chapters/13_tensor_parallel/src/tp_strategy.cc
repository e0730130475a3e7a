// train_gpt2 --tp N [--sequence-parallel]: the ParallelStrategy "tp" of chapter 09's training
// library (tt/train_parallel.h), DP x TP over tt::dist::world(). The world is laid out as a grid
// dp x tp (tp innermost); each tp group splits the model (TensorParallelGPT2), the dp groups
// average gradients with chapter 12's DistributedDataParallel. Checkpoints hold whole tensors
// (the one-process format), so a run resumes under any layout.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/autograd.h"
#include "tt/checkpoint.h"
#include "tt/ddp.h"
#include "tt/dispatcher.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/gpt2.h"
#include "tt/process_grid.h"
#include "tt/tp_gpt2.h"
#include "tt/train_parallel.h"

namespace tt::tp {
namespace {

// The switch `name` of the environment: `fallback` when unset, off when "0", else on.
bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::string(v) != "0";
}

class TensorParallelStrategy final : public gpt2::ParallelStrategy {
 public:
  std::string name() const override { return "tp"; }
  int rank() const override { return world_.rank(); }
  int world_size() const override { return world_.world_size(); }
  int local_rank() const override { return world_.local_rank(); }
  int data_rank() const override { return grid_->coordinate("dp"); }
  int data_world_size() const override { return grid_->size("dp"); }

  void set_device_type(DeviceType type) override { connect_world_gpus(type); }

  void set_model_parallelism(int tp, bool sequence_parallel) override {
    // A collective of the world: the grid's groups (every rank calls it with the same tp; the
    // options were compared before, and ProcessGrid checks the sizes again).
    grid_ = std::make_unique<ProcessGrid>(ProcessGrid::dp_tp(world_, tp));
    options_.sequence_parallel = sequence_parallel;
    // On unless the environment says 0: f's all-reduce overlapping the weight-gradient GEMM
    // (1-2% of a bf16 step on 2 and 4 H200s), and SP's re-gather in backward (memory).
    options_.early_grad_reduce = env_flag("TT_TP_EARLY_GRAD_REDUCE", true);
    options_.regather_in_backward = env_flag("TT_TP_SP_REGATHER", true);
  }

  void prepare_model(nn::Module& model) override {
    release_world_gpus();  // the grid is split: its groups have their communicators
    auto* gpt = dynamic_cast<gpt2::GPT2*>(&model);
    TT_CHECK(gpt != nullptr, "the tensor-parallel strategy splits GPT-2 models only, got a ",
             model.type_name());
    split_ = std::make_unique<TensorParallelGPT2>(*gpt, grid_->group("tp"), options_);
  }

  gpt2::ModelOps model_ops(gpt2::ModelOps ops) const override {
    TT_CHECK(split_ != nullptr, "tp strategy: prepare_model must come before model_ops");
    return split_->wrap(std::move(ops));
  }

  std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model,
                                                   std::vector<optim::ParamGroup> groups,
                                                   const optim::AdamWOptions& options,
                                                   const gpt2::AdamWFactory& adamw = {}) override {
    TT_CHECK(split_ != nullptr, "tp strategy: prepare_model must come before make_optimizer");
    if (grid_->size("dp") > 1) {  // the replicas start from dp rank 0's parts (the same seed)
      ddp_ = std::make_unique<dist::DistributedDataParallel>(
          std::shared_ptr<nn::Module>(std::shared_ptr<nn::Module>(), &model), grid_->group("dp"));
    }
    return ParallelStrategy::make_optimizer(model, std::move(groups), options, adamw);
  }

  // With data parallelism the gradients are zeroed in DDP's buckets (chapter 12).
  void zero_grad(optim::Optimizer& optimizer) override {
    if (ddp_) {
      ddp_->zero_grad();
    } else {
      optimizer.zero_grad();
    }
  }

  void backward(const Tensor& loss, bool last) override {
    if (ddp_ && !last) {
      auto guard = ddp_->no_sync();
      autograd::backward(loss);
      ddp_->sync_gradients();  // inside no_sync: nothing sent
    } else {
      autograd::backward(loss);
      if (ddp_) ddp_->sync_gradients();
    }
    // Sequence parallelism: the replicated parameters' gradients cover this rank's tokens; sum
    // them once, after the last micro-batch (the accumulated sum of partial sums).
    if (last) split_->finish_backward();
  }

  double clip_grad_norm(optim::Optimizer& optimizer, double max_norm) override {
    const double norm = split_->grad_norm();  // every rank's parts: the whole model's norm
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1) {
      std::vector<Tensor> grads;
      for (const auto& group : optimizer.param_groups()) {
        for (const Tensor& p : group.params) {
          if (p.grad().defined()) grads.push_back(p.grad());
        }
      }
      if (!grads.empty()) {
        call_kernel<optim::ScaleInplaceKernel>("scale_", grads[0].device(), grads, coef);
      }
    }
    return norm;
  }

  double average(double value) override { return reduce(value, dist::ReduceOp::kAvg); }
  double maximum(double value) override {
    const Tensor all = empty({world_.world_size()}, {.dtype = DType::kFloat64});
    world_.all_gather(all, full({1}, value, {.dtype = DType::kFloat64}));
    double m = value;
    for (int64_t r = 0; r < all.numel(); ++r) m = std::max(m, all.at<double>({r}));
    return m;
  }

  void save_checkpoint(const std::string& path, const nn::Module& model,
                       optim::Optimizer& optimizer) override {
    (void)model;
    // Whole tensors, gathered over each tp group (collectives: every rank), in chapter 05's
    // layout ("model.", "optimizer.", "meta."), written by rank 0.
    nn::StateDict all = nn::prefixed("model", split_->full_state_dict());
    for (auto& e : nn::prefixed("optimizer", split_->full_optimizer_state(optimizer))) {
      all.push_back(std::move(e));
    }
    for (auto& e : nn::prefixed(ckpt::kMetadataPrefix, checkpoint_metadata())) {
      all.push_back(std::move(e));
    }
    if (rank() == 0) ckpt::save(path, all);
    world_.barrier();  // the file is complete before any rank goes on
  }

  void load_checkpoint(const std::string& path, nn::Module& model,
                       optim::Optimizer& optimizer) override {
    (void)model;
    nn::StateDict weights, state;
    for (auto& [key, t] : ckpt::load(path)) {  // every rank reads the whole file
      if (key.starts_with("model.")) weights.emplace_back(key.substr(6), t);
      if (key.starts_with("optimizer.")) state.emplace_back(key.substr(10), t);
    }
    split_->load_full_state_dict(weights, path);
    split_->load_full_optimizer_state(optimizer, state, path);
  }

  void finish() override {
    ddp_.reset();
    split_.reset();
    grid_.reset();  // its groups go before MPI does
    dist::finalize();
  }

 private:
  double reduce(double value, dist::ReduceOp op) {
    const Tensor t = full({1}, value, {.dtype = DType::kFloat64});
    world_.all_reduce(t, op);
    return t.item();
  }

  dist::ProcessGroup& world_ = dist::world();
  TpOptions options_;
  std::unique_ptr<ProcessGrid> grid_;
  std::unique_ptr<TensorParallelGPT2> split_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
};

TT_REGISTER_PARALLEL_STRATEGY("tp", [] { return std::make_unique<TensorParallelStrategy>(); });

}  // namespace
}  // namespace tt::tp
