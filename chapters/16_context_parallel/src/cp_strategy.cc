// train_gpt2 --cp N [--tp K]: the ParallelStrategy "cp" of chapter 09's training library
// (tt/train_parallel.h), DP x CP (x TP) over tt::dist::world(). The world is laid out as a grid
// dp x cp x tp (tp innermost); each cp group splits every sequence (context_parallel_ops). Every
// thing but the layout is delegated to an inner strategy: chapter 12's "ddp" (gradients averaged
// over all the ranks), or with --tp chapter 13's "tp", whose data-parallel groups (the ranks of
// one tp coordinate) are then the dp x cp ranks: a cp rank's gradient is a share of the
// replica's gradient exactly as a dp rank's is (tt/context_parallel.h). Checkpoints are the
// inner strategy's (whole tensors, the one-process format): a run resumes under any layout.
// With --pp, train_gpt2 runs chapter 14's strategy "pp" instead, whose grid dp x pp x cp x tp
// wraps each stage's operations with the context-parallel ones registered here
// (pp::register_context_parallel_wrap): PP x CP (x TP x DP). train_llama --cp N runs this
// strategy too, with LLaMA's loss registered here for chapter 15's LlamaFamily
// (llama::register_llama_strategy_loss): DP x CP.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/context_parallel.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/llama_family.h"
#include "tt/pipeline.h"
#include "tt/process_grid.h"
#include "tt/train.h"
#include "tt/train_parallel.h"

namespace tt::cp {
namespace {

class ContextParallelStrategy final : public gpt2::ParallelStrategy {
 public:
  std::string name() const override { return "cp"; }
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int data_rank() const override { return grid_ ? grid_->coordinate("dp") : rank(); }
  int data_world_size() const override { return grid_ ? grid_->size("dp") : world_size(); }

  void set_device_type(DeviceType type) override { tp::connect_world_gpus(type); }

  void set_model_parallelism(int tp, bool sequence_parallel) override {
    TT_CHECK(!sequence_parallel,
             "cp strategy: context parallelism does not compose with "
             "sequence parallelism (--sequence-parallel)");
    if (tp > 1) inner_ = gpt2::make_parallel_strategy("tp");
    inner_->set_model_parallelism(tp, false);  // "tp": its dp x tp grid (a collective)
    tp_ = tp;
  }
  void set_context_parallelism(int cp) override {
    dist::ProcessGroup& world = dist::world();
    TT_CHECK(cp >= 1 && world.world_size() % (cp * tp_) == 0, "--cp ", cp, " x --tp ", tp_,
             " must divide the ", world.world_size(), " ranks (", world.where(), ")");
    // A collective of the world (every rank calls it with the same cp and tp).
    grid_ = std::make_unique<tp::ProcessGrid>(
        world,
        std::vector<tp::GridDim>{{"dp", world.world_size() / (cp * tp_)}, {"cp", cp}, {"tp", tp_}});
  }
  void prepare_model(nn::Module& model) override {
    tp::release_world_gpus();  // the grids are split: their groups have their communicators
    inner_->prepare_model(model);
  }
  gpt2::ModelOps model_ops(gpt2::ModelOps ops) const override {
    TT_CHECK(grid_ != nullptr, "cp strategy: set_context_parallelism must come before model_ops");
    return context_parallel_ops(inner_->model_ops(std::move(ops)), grid_->group("cp"),
                                Layout::kZigzag);
  }

  // The rest is the inner strategy's: data parallelism over the dp x cp ranks.
  std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model,
                                                   std::vector<optim::ParamGroup> groups,
                                                   const optim::AdamWOptions& options,
                                                   const gpt2::AdamWFactory& adamw = {}) override {
    return inner_->make_optimizer(model, std::move(groups), options, adamw);
  }
  std::unique_ptr<gpt2::StepRunner> make_step_runner(
      gpt2::GPT2& model, optim::Optimizer& optimizer, int64_t B, int64_t T,
      const gpt2::TrainStepOptions& options) override {
    return inner_->make_step_runner(model, optimizer, B, T, options);
  }
  void zero_grad(optim::Optimizer& optimizer) override { inner_->zero_grad(optimizer); }
  void backward(const Tensor& loss, bool last) override { inner_->backward(loss, last); }
  double clip_grad_norm(optim::Optimizer& optimizer, double max_norm) override {
    return inner_->clip_grad_norm(optimizer, max_norm);
  }
  void step(optim::Optimizer& optimizer) override { inner_->step(optimizer); }
  double average(double value) override { return inner_->average(value); }
  double maximum(double value) override { return inner_->maximum(value); }
  void save_checkpoint(const std::string& path, const nn::Module& model,
                       optim::Optimizer& optimizer) override {
    inner_->set_checkpoint_metadata(checkpoint_metadata());
    inner_->save_checkpoint(path, model, optimizer);
  }
  void load_checkpoint(const std::string& path, nn::Module& model,
                       optim::Optimizer& optimizer) override {
    inner_->load_checkpoint(path, model, optimizer);
  }
  int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const override {
    return inner_->optimizer_state_bytes(optimizer);
  }
  void finish() override {
    grid_.reset();  // its groups go before MPI does
    inner_->finish();
  }

  /// The group of the ranks that split this rank's sequences (after set_context_parallelism).
  dist::ProcessGroup& cp_group() {
    TT_CHECK(grid_ != nullptr, "cp strategy: set_context_parallelism must come first");
    return grid_->group("cp");
  }
  /// --tp.
  int tp_size() const { return tp_; }

 private:
  std::unique_ptr<gpt2::ParallelStrategy> inner_ = gpt2::make_parallel_strategy("ddp");
  int tp_ = 1;
  std::unique_ptr<tp::ProcessGrid> grid_;
};

TT_REGISTER_PARALLEL_STRATEGY("cp", [] { return std::make_unique<ContextParallelStrategy>(); });

// train_llama --cp N: each rank's loss is its shard of every sequence (RoPE at the global
// positions, ring attention; cp::llama_context_parallel_loss), and the inner strategy averages
// the gradients over dp x cp as for GPT-2. A LLaMA has no tensor parallelism: --tp is refused.
const bool kLlamaLossRegistered =
    llama::register_llama_strategy_loss("cp", [](gpt2::ParallelStrategy& par) -> llama::LlamaLoss {
      auto* strategy = dynamic_cast<ContextParallelStrategy*>(&par);
      TT_CHECK(strategy != nullptr,
               "train_llama --cp: expected chapter 16's strategy \"cp\", got '", par.name(), "'");
      TT_CHECK(strategy->tp_size() == 1, "train_llama --cp ", "with --tp ", strategy->tp_size(),
               ": a LLaMA has no tensor parallelism yet (context parallelism composes with data "
               "parallelism here)");
      dist::ProcessGroup* group = &strategy->cp_group();
      return [group](llama::Llama& model, const Tensor& idx, const Tensor& targets) {
        return llama_context_parallel_loss(model, idx, targets, *group, Layout::kZigzag);
      };
    });

// The pipeline's stages under --pp --cp: the same operations over the stage's cp group.
const bool kPipelineWrapRegistered =
    pp::register_context_parallel_wrap([](gpt2::ModelOps ops, dist::ProcessGroup& group) {
      return context_parallel_ops(std::move(ops), group, Layout::kZigzag);
    });

}  // namespace
}  // namespace tt::cp
