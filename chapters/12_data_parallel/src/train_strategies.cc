// The data-parallel training strategies of train_gpt2 (chapter 09's tt/train_parallel.h):
// "ddp" (DistributedDataParallel + AdamW) and "zero1" (ZeroAdamW), over tt::dist::world().
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "tt/autograd.h"
#include "tt/checkpoint.h"
#include "tt/ddp.h"
#include "tt/dist.h"
#include "tt/train_parallel.h"
#include "tt/zero.h"

namespace tt::dist {
namespace {

/// What both strategies share: the world group, the loss mean, the end of MPI.
class WorldStrategy : public gpt2::ParallelStrategy {
 public:
  int rank() const override { return group_.rank(); }
  int world_size() const override { return group_.world_size(); }
  int local_rank() const override { return group_.local_rank(); }
  double average(double value) override { return reduce(value, ReduceOp::kAvg); }
  double maximum(double value) override {
    const Tensor mine = full({1}, value, {.dtype = DType::kFloat64});
    const Tensor all = empty({group_.world_size()}, {.dtype = DType::kFloat64});
    group_.all_gather(all, mine);
    double m = value;
    for (int64_t r = 0; r < all.numel(); ++r) m = std::max(m, all.at<double>({r}));
    return m;
  }
  void finish() override { finalize(); }

 protected:
  double reduce(double value, ReduceOp op) {
    const Tensor t = full({1}, value, {.dtype = DType::kFloat64});
    group_.all_reduce(t, op);
    return t.item();
  }
  /// Throws unless every parameter is on the CPU (collectives through MPI) or every parameter
  /// is on this rank's GPU, cuda:local_rank (collectives through NCCL, one GPU per rank).
  void check_cpu_or_own_gpu(const nn::Module& model) const {
    const std::vector<Tensor> params = model.parameters();
    if (params.empty() || params[0].device().is_cpu()) {
      for (const Tensor& p : params) {
        TT_CHECK(p.device().is_cpu(), name(), " (", group_.where(), "): parameter ", p.describe(),
                 " is not on the CPU like parameter 0 (", params[0].describe(),
                 "); the parameters must all be on the CPU or all on this rank's GPU");
      }
      return;
    }
    const Device gpu = Device::cuda(group_.local_rank());
    TT_CHECK(ProcessGroup::built_with_nccl(), name(), " (", group_.where(), "): parameter ",
             params[0].describe(),
             " is on a GPU, but this build has no NCCL for collectives "
             "on CUDA tensors (use --device cpu)");
    for (const Tensor& p : params) {
      TT_CHECK(p.device() == gpu, name(), " (", group_.where(), "): parameter ", p.describe(),
               " must be on this rank's GPU ", gpu.str(), " (local rank ", group_.local_rank(),
               "; NCCL needs one GPU per rank)");
    }
  }
  /// The model's buffers (every rank starts from rank 0's).
  static std::vector<Tensor> buffers_of(const nn::Module& model) {
    std::vector<Tensor> out;
    for (const auto& nt : model.named_buffers()) out.push_back(nt.second);
    return out;
  }

  ProcessGroup& group_ = world();
};

/// DistributedDataParallel: every rank holds AdamW's whole state; gradients are averaged once
/// per step, after the last micro-batch (the earlier ones run under no_sync()).
class DdpStrategy final : public WorldStrategy {
 public:
  std::string name() const override { return "ddp"; }
  /// The reducer of the model's DDP wrapper (null before make_optimizer).
  const Reducer* reducer() const { return ddp_ ? &ddp_->reducer() : nullptr; }

  std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model,
                                                   std::vector<optim::ParamGroup> groups,
                                                   const optim::AdamWOptions& options,
                                                   const gpt2::AdamWFactory& adamw = {}) override {
    check_cpu_or_own_gpu(model);  // the Reducer's buckets live on the parameters' device
    // DDP takes shared ownership; the caller owns the model, so share it without owning it.
    ddp_ = std::make_unique<DistributedDataParallel>(
        std::shared_ptr<nn::Module>(std::shared_ptr<nn::Module>(), &model), group_);
    return ParallelStrategy::make_optimizer(model, std::move(groups), options, adamw);
  }

  // The gradients are zeroed in the buckets (DistributedDataParallel::zero_grad), so that
  // backward accumulates where the all-reduce reads: no copy into the buckets.
  void zero_grad(optim::Optimizer& optimizer) override {
    (void)optimizer;  // its parameters are the model's, whose gradients the buckets hold
    TT_CHECK(ddp_ != nullptr, "ddp strategy: call make_optimizer before zero_grad");
    ddp_->zero_grad();
  }

  void backward(const Tensor& loss, bool last) override {
    TT_CHECK(ddp_ != nullptr, "ddp strategy: call make_optimizer before backward");
    if (last) {
      autograd::backward(loss);
      ddp_->sync_gradients();  // averages the gradients accumulated over the micro-batches
    } else {
      auto guard = ddp_->no_sync();
      autograd::backward(loss);
      ddp_->sync_gradients();  // inside no_sync: communicates nothing
    }
  }

  void save_checkpoint(const std::string& path, const nn::Module& model,
                       optim::Optimizer& optimizer) override {
    if (rank() == 0) ParallelStrategy::save_checkpoint(path, model, optimizer);
    group_.barrier();  // the file is complete before any rank goes on
  }

 private:
  std::unique_ptr<DistributedDataParallel> ddp_;
};

/// The optimizer train_step sees under ZeRO-1: the parameter groups, the learning rate and the
/// step count, without state; ZeroAdamW (in the strategy) holds the moment shards and updates.
class ZeroOptimizerView final : public optim::Optimizer {
 public:
  ZeroOptimizerView(std::vector<optim::ParamGroup> groups, double lr)
      : Optimizer("ZeroAdamW", std::move(groups), lr, {}) {}

 protected:
  // Zero1Strategy::step already updated the parameters (ZeroAdamW::update); Optimizer::step()
  // then only counts the step.
  void update(const std::vector<Tensor>&, const std::vector<Tensor>&,
              const std::vector<std::vector<Tensor>>&, double, int64_t) override {}
};

/// ZeRO-1: AdamW's moments sharded over the ranks. Gradients are reduce-scattered after the
/// last micro-batch, clipped by the global norm of the shards, each rank updates its shard and
/// all-gathers the parameters. Checkpoints hold the full moments (gathered to rank 0), in
/// AdamW's format: a ZeRO-1 run resumes as DDP or as one process, and back.
class Zero1Strategy final : public WorldStrategy {
 public:
  std::string name() const override { return "zero1"; }

  std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model,
                                                   std::vector<optim::ParamGroup> groups,
                                                   const optim::AdamWOptions& options,
                                                   const gpt2::AdamWFactory& adamw = {}) override {
    // ZeroAdamW is the update (an operation set's own AdamW is not used: chapter 11's bf16 set
    // then casts the float32 weights on use instead of reading copies).
    (void)adamw;
    check_cpu_or_own_gpu(model);  // ZeroAdamW's shards and buffers live on the parameters' device
    groups_ = groups;
    options_ = options;
    zero_ = std::make_unique<ZeroAdamW>(groups, options, group_);  // broadcasts the parameters
    broadcast_tensors(group_, buffers_of(model));
    return std::make_unique<ZeroOptimizerView>(std::move(groups), options.lr);
  }

  void backward(const Tensor& loss, bool last) override {
    TT_CHECK(zero_ != nullptr, "zero1 strategy: call make_optimizer before backward");
    autograd::backward(loss);
    if (last) zero_->reduce_gradients();
  }

  double clip_grad_norm(optim::Optimizer& optimizer, double max_norm) override {
    (void)optimizer;
    return zero_->clip_grad_norm(max_norm);
  }

  void step(optim::Optimizer& optimizer) override {
    zero_->set_lr(optimizer.lr());
    zero_->update();
    optimizer.step();  // counts the step (ZeroOptimizerView::update does nothing)
  }

  void save_checkpoint(const std::string& path, const nn::Module& model,
                       optim::Optimizer& optimizer) override {
    const std::vector<Tensor> moments = zero_->gather_state();  // collective: every rank
    if (rank() == 0) {
      optim::AdamW full_state(groups_, options_);  // AdamW's format, filled from the shards
      for (const auto& [key, t] : full_state.state_dict()) {
        if (key == "step") {
          t.fill_(static_cast<double>(optimizer.step_count()));
        } else if (key == "lr") {
          t.fill_(optimizer.lr());
        } else {  // "state.<i>.exp_avg" or "state.<i>.exp_avg_sq"
          const std::size_t i = std::stoul(key.substr(6));
          const int k = key.ends_with(".exp_avg_sq") ? 1 : 0;
          t.copy_(moments[static_cast<std::size_t>(k)]
                      .narrow(0, zero_->offsets()[i], t.numel())
                      .view(t.shape()));
        }
      }
      ckpt::save_checkpoint(path, model, &full_state, checkpoint_metadata());
    }
    group_.barrier();
  }

  void load_checkpoint(const std::string& path, nn::Module& model,
                       optim::Optimizer& optimizer) override {
    optim::AdamW full_state(groups_, options_);
    ckpt::load_checkpoint(path, model, &full_state);  // every rank reads the file
    // The full moments, flattened in ZeroAdamW's order (parameters over the groups), on the
    // parameters' device like full_state's.
    const TensorOptions on_device{.device = zero_->device()};
    const Tensor moments[2] = {empty({zero_->total_numel()}, on_device),
                               empty({zero_->total_numel()}, on_device)};
    nn::StateDict counters;
    for (const auto& [key, t] : full_state.state_dict()) {
      if (key == "step" || key == "lr") {
        counters.emplace_back(key, t);
      } else {  // "state.<i>.exp_avg" or "state.<i>.exp_avg_sq"
        const std::size_t i = std::stoul(key.substr(6));
        moments[key.ends_with(".exp_avg_sq") ? 1 : 0]
            .narrow(0, zero_->offsets()[i], t.numel())
            .copy_(t.reshape({t.numel()}));
      }
    }
    zero_->set_state_from_full(moments[0], moments[1]);
    zero_->set_step_count(full_state.step_count());
    zero_->set_lr(full_state.lr());
    optimizer.load_state_dict(counters, path);
  }

  int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const override {
    (void)optimizer;
    return zero_->state_bytes();
  }

 private:
  std::vector<optim::ParamGroup> groups_;
  optim::AdamWOptions options_;
  std::unique_ptr<ZeroAdamW> zero_;
};

TT_REGISTER_PARALLEL_STRATEGY("ddp", [] { return std::make_unique<DdpStrategy>(); });
TT_REGISTER_PARALLEL_STRATEGY("zero1", [] { return std::make_unique<Zero1Strategy>(); });

}  // namespace

const Reducer* strategy_reducer(const gpt2::ParallelStrategy& strategy) {
  const auto* ddp = dynamic_cast<const DdpStrategy*>(&strategy);
  return ddp != nullptr ? ddp->reducer() : nullptr;
}

}  // namespace tt::dist
