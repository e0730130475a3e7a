// train_gpt2 --cp N: the ParallelStrategy "cp" of chapter 09's training library
// (tt/train_parallel.h), DP x CP over tt::dist::world(). The world is laid out as a grid dp x cp
// (cp innermost); each cp group splits every sequence (context_parallel_ops), and the gradients
// are averaged over all the ranks by chapter 12's "ddp" strategy, to which everything but the
// layout is delegated: a cp rank's gradient is a share of the replica's gradient exactly as a
// dp rank's is (tt/context_parallel.h). The model is whole on every rank, so checkpoints are
// the one-process format and a run resumes under any layout.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/context_parallel.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/process_grid.h"
#include "tt/train_parallel.h"

namespace tt::cp {
namespace {

class ContextParallelStrategy final : public gpt2::ParallelStrategy {
 public:
  std::string name() const override { return "cp"; }
  int rank() const override { return ddp_->rank(); }
  int world_size() const override { return ddp_->world_size(); }
  int local_rank() const override { return ddp_->local_rank(); }
  int data_rank() const override { return grid_ ? grid_->coordinate("dp") : rank(); }
  int data_world_size() const override { return grid_ ? grid_->size("dp") : world_size(); }

  void set_context_parallelism(int cp) override {
    dist::ProcessGroup& world = dist::world();
    TT_CHECK(cp >= 1 && world.world_size() % cp == 0, "--cp ", cp, " must divide the ",
             world.world_size(), " ranks (", world.where(), ")");
    // A collective of the world (every rank calls it with the same cp).
    grid_ = std::make_unique<tp::ProcessGrid>(
        world, std::vector<tp::GridDim>{{"dp", world.world_size() / cp}, {"cp", cp}});
  }
  gpt2::ModelOps model_ops(gpt2::ModelOps ops) const override {
    TT_CHECK(grid_ != nullptr, "cp strategy: set_context_parallelism must come before model_ops");
    return context_parallel_ops(std::move(ops), grid_->group("cp"), Layout::kZigzag);
  }

  // The rest is data parallelism over every rank.
  std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model,
                                                   std::vector<optim::ParamGroup> groups,
                                                   const optim::AdamWOptions& options,
                                                   const gpt2::AdamWFactory& adamw = {}) override {
    return ddp_->make_optimizer(model, std::move(groups), options, adamw);
  }
  void backward(const Tensor& loss, bool last) override { ddp_->backward(loss, last); }
  double clip_grad_norm(optim::Optimizer& optimizer, double max_norm) override {
    return ddp_->clip_grad_norm(optimizer, max_norm);
  }
  void step(optim::Optimizer& optimizer) override { ddp_->step(optimizer); }
  double average(double value) override { return ddp_->average(value); }
  double maximum(double value) override { return ddp_->maximum(value); }
  void save_checkpoint(const std::string& path, const nn::Module& model,
                       optim::Optimizer& optimizer) override {
    ddp_->set_checkpoint_metadata(checkpoint_metadata());
    ddp_->save_checkpoint(path, model, optimizer);
  }
  void load_checkpoint(const std::string& path, nn::Module& model,
                       optim::Optimizer& optimizer) override {
    ddp_->load_checkpoint(path, model, optimizer);
  }
  int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const override {
    return ddp_->optimizer_state_bytes(optimizer);
  }
  void finish() override {
    grid_.reset();  // its groups go before MPI does
    ddp_->finish();
  }

 private:
  std::unique_ptr<gpt2::ParallelStrategy> ddp_ = gpt2::make_parallel_strategy("ddp");
  std::unique_ptr<tp::ProcessGrid> grid_;
};

TT_REGISTER_PARALLEL_STRATEGY("cp", [] { return std::make_unique<ContextParallelStrategy>(); });

}  // namespace
}  // namespace tt::cp
