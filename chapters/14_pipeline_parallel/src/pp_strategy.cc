// train_gpt2 --pp P [--cp J] [--tp K] [--micro-batches M] [--schedule S] [--chunks V]: the
// ParallelStrategy "pp" of chapter 09's training library (tt/train_parallel.h). The world is laid
// out as a grid dp x pp x cp x tp (tp innermost, then cp, then pp: world rank = ((dp * P + pp) *
// J + cp) * K + tp), so a tp group sits on consecutive ranks (one node), a cp ring next to it,
// and the pipeline's neighbours are J K ranks apart. Each tp group splits the model (chapter
// 13's TensorParallelGPT2, when K > 1); each cp group splits every sequence (chapter 16's
// context-parallel operations, registered with register_context_parallel_wrap, when J > 1: its
// ranks hold T/J positions of every micro-batch, so the activations between the stages are
// [B/M, T/J, C], and each stage's attention is ring attention over its cp group); each pp group
// runs the stages with a PipelineTrainer; the dp x cp ranks of a stage (those of one pp and tp
// coordinate) average the gradients, as chapter 16's DDP over dp x cp does. Each batch of B
// rows is cut into M micro-batches of B / M rows; with gradient accumulation (--total-batch) the
// pipeline runs M x accumulation micro-batches per step. Each rank keeps only its stages'
// parameters (released in prepare_model, before the model moves to its device), so its
// gradients, AdamW moments and bfloat16 weight copies are its stages' too. The validation loss
// runs through the stages (PipelineTrainer::evaluate). Checkpoints hold whole tensors in the
// one-process format, brought one at a time to rank 0 (made whole over tp on their stage, then
// sent over pp), so a run resumes under any layout; loading fills each rank's own parameters.
// No rank holds the whole model, so train_gpt2 prints no text samples and exports no llm.c
// model under --pp (chapter 09's ParallelStrategy::splits_model): resume the checkpoint in one
// process for those. --pp-partition measured (tp = cp = 1) cannot cut before the model has its
// device and operations: prepare_model then keeps the whole model (it moves to the device
// whole), make_optimizer times the parts with the model's operations (measure_gpt2_costs over
// the pp group, then data-parallel replica 0's costs broadcast over the world, so every rank
// cuts alike) and releases the other stages' parameters there, before any gradient or moment
// exists.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tt/checkpoint.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/gpt2.h"
#include "tt/pipeline.h"
#include "tt/process_grid.h"
#include "tt/tp_gpt2.h"
#include "tt/train.h"
#include "tt/train_parallel.h"
#include "tt/train_setup.h"

namespace tt::pp {
namespace {

gpt2::GPT2& as_gpt2(nn::Module& model) {
  auto* gpt = dynamic_cast<gpt2::GPT2*>(&model);
  TT_CHECK(gpt != nullptr, "the pipeline strategy \"pp\" runs GPT-2 models only, got a ",
           model.type_name());
  return *gpt;
}

/// One optimizer step of the pipeline: each batch of B rows from the loader cut into
/// `per_batch` micro-batches, PipelineTrainer::step on them.
class PipelineStepRunner final : public gpt2::StepRunner {
 public:
  PipelineStepRunner(PipelineTrainer& trainer, optim::Optimizer& optimizer, int per_batch,
                     std::string description)
      : trainer_(trainer),
        optimizer_(optimizer),
        per_batch_(per_batch),
        description_(std::move(description)) {}

  gpt2::TrainStepResult step(const std::function<Batch()>& next_batch) override {
    std::vector<Batch> parts;
    std::size_t used = 0;
    const auto next_micro_batch = [&] {
      if (used == parts.size()) {
        const Batch b = next_batch();
        const int64_t rows = b.inputs.size(0) / per_batch_;
        parts.clear();
        for (int64_t i = 0; i < per_batch_; ++i) {
          parts.push_back({b.inputs.narrow(0, i * rows, rows).contiguous(),
                           b.targets.narrow(0, i * rows, rows).contiguous()});
        }
        used = 0;
      }
      return parts[used++];
    };
    return trainer_.step(optimizer_, next_micro_batch);
  }
  std::optional<double> evaluate(const std::function<Batch()>& next_batch,
                                 int64_t num_batches) override {
    return trainer_.evaluate(next_batch, num_batches);
  }
  std::string description() const override { return description_; }

 private:
  PipelineTrainer& trainer_;
  optim::Optimizer& optimizer_;
  int64_t per_batch_;
  std::string description_;
};

class PipelineStrategy final : public gpt2::ParallelStrategy {
 public:
  std::string name() const override { return "pp"; }
  int rank() const override { return world_.rank(); }
  int world_size() const override { return world_.world_size(); }
  int local_rank() const override { return world_.local_rank(); }
  int data_rank() const override { return grid().coordinate("dp"); }
  int data_world_size() const override { return grid().size("dp"); }

  void set_device_type(DeviceType type) override { tp::connect_world_gpus(type); }

  void set_context_parallelism(int cp) override {
    TT_CHECK(cp >= 1, "the pipeline strategy \"pp\": --cp must be >= 1, got ", cp);
    if (cp > 1) (void)context_parallel_wrap();  // chapter 16 linked in, else a clear error
    cp_ = cp;
  }

  void set_model_parallelism(int tp, bool sequence_parallel) override {
    TT_CHECK(tp >= 1 && !sequence_parallel, "the pipeline strategy \"pp\" (tp=", tp,
             sequence_parallel ? ", sequence parallel" : "",
             "): needs tp >= 1, and sends whole sequences between the stages (no sequence "
             "parallelism)");
    tp_ = tp;
  }

  void set_pipeline(const gpt2::PipelineSpec& spec) override {
    const int n = world_.world_size(), per_replica = spec.stages * cp_ * tp_;
    // What every rank knows alike: the same error everywhere, before the grid's collectives.
    TT_CHECK(spec.stages >= 1 && spec.micro_batches >= 1 && n % per_replica == 0,
             "the pipeline strategy \"pp\" (", world_.where(), "): pp=", spec.stages,
             " stages x cp=", cp_, " x tp=", tp_, " = ", per_replica,
             " ranks per data-parallel replica do not divide the world of ", n,
             " ranks (dp x pp x cp x tp must equal the number of processes)");
    kind_ = parse_schedule_kind(spec.schedule);
    partition_ = parse_partition_kind(spec.partition);
    TT_CHECK(partition_ != PartitionKind::kMeasured || (tp_ == 1 && cp_ == 1),
             "the pipeline strategy \"pp\": --pp-partition measured times unsplit blocks, not "
             "with tp=",
             tp_, " or cp=", cp_);
    // p, v and the schedule (m, which includes the accumulation, when the pipeline is made).
    PipelineShape{spec.stages, 2 * spec.stages, spec.chunks}.validate(kind_);
    spec_ = spec;
    grid_ = std::make_unique<tp::ProcessGrid>(
        world_, std::vector<tp::GridDim>{
                    {"dp", n / per_replica}, {"pp", spec.stages}, {"cp", cp_}, {"tp", tp_}});
    // The ranks that average a stage's gradients: its dp x cp ranks (one pp and tp coordinate);
    // without context parallelism the dp group itself.
    if (cp_ > 1) replicas_ = grid_->split_over({"dp", "cp"});
  }

  void prepare_model(nn::Module& model) override {
    tp::release_world_gpus();  // the grid is split: its groups have their communicators
    gpt2::GPT2& gpt = as_gpt2(model);
    // More virtual stages than blocks (e.g. an --init-llmc model): refused before any split.
    (void)gpt2_stage_layers(gpt.config(), spec_.stages * spec_.chunks);
    if (tp_ > 1) split_ = std::make_unique<tp::TensorParallelGPT2>(gpt, grid().group("tp"));
    if (partition_ == PartitionKind::kMeasured) return;  // cut in make_optimizer (see above)
    // The FLOP model at the run's T (or 1 per block): no collective, the same on every rank.
    costs_ = gpt2_partition_costs(partition_, world_, gpt.config(), Device::cpu(), gpt.ops(),
                                  spec_.micro_batch_rows, spec_.seq_len);
    // This rank's stages only, from here on (the model is still on the CPU).
    own_stages(gpt).keep_only_own_parameters();
  }

  gpt2::ModelOps model_ops(gpt2::ModelOps ops) const override {
    if (split_) ops = split_->wrap(std::move(ops));
    // Chapter 16's embedding, ring attention and loss over the cp group, around the tp split.
    return cp_ > 1 ? context_parallel_wrap()(std::move(ops), grid().group("cp")) : ops;
  }

  std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model,
                                                   std::vector<optim::ParamGroup> groups,
                                                   const optim::AdamWOptions& options,
                                                   const gpt2::AdamWFactory& adamw = {}) override {
    gpt2::GPT2& gpt = as_gpt2(model);
    if (partition_ == PartitionKind::kMeasured && costs_.empty()) {
      // The model is on its device with the run's operations: time its parts there, agree on
      // them (the pp group's median, then dp replica 0's over the world), cut, release.
      costs_ = measure_gpt2_block_costs(grid().group("pp"), gpt.config(), gpt.device(), gpt.ops(),
                                        spec_.micro_batch_rows, spec_.seq_len);
      const Tensor agreed = from_vector(costs_, {static_cast<int64_t>(costs_.size())});
      world_.broadcast(agreed, 0);
      costs_ = agreed.to_vector<double>();
      own_stages(gpt).keep_only_own_parameters();
    }
    // The parameters of this rank's stages. The ranks start equal: every rank built the model
    // from the same seed (or file).
    return ParallelStrategy::make_optimizer(
        model, only_parameters(std::move(groups), own_stages(gpt).parameters()), options, adamw);
  }

  std::unique_ptr<gpt2::StepRunner> make_step_runner(
      gpt2::GPT2& model, optim::Optimizer& optimizer, int64_t B, int64_t T,
      const gpt2::TrainStepOptions& step_options) override {
    TT_CHECK(B % spec_.micro_batches == 0, "the pipeline strategy \"pp\": B = ", B,
             " rows per batch cannot be cut into ", spec_.micro_batches, " equal micro-batches");
    PipelineOptions o;
    o.schedule = kind_;
    o.micro_batches = spec_.micro_batches * static_cast<int>(step_options.grad_accum_steps);
    o.chunks = spec_.chunks;
    o.max_grad_norm = step_options.max_grad_norm;
    o.block_costs = costs_;  // the costs own_stages cut by
    o.tp = split_ ? &grid().group("tp") : nullptr;
    o.cp = cp_ > 1 ? &grid().group("cp") : nullptr;  // checks T % 2 cp before any collective
    trainer_ = std::make_unique<PipelineTrainer>(model, grid().group("pp"),
                                                 replicas_ ? replicas_.get() : &grid().group("dp"),
                                                 o, B / spec_.micro_batches, T);
    return std::make_unique<PipelineStepRunner>(*trainer_, optimizer, spec_.micro_batches,
                                                describe(B, step_options.grad_accum_steps));
  }

  double average(double value) override {
    const Tensor t = full({1}, value, {.dtype = DType::kFloat64});
    world_.all_reduce(t, dist::ReduceOp::kAvg);
    return t.item();
  }
  double maximum(double value) override {
    const Tensor all = empty({world_.world_size()}, {.dtype = DType::kFloat64});
    world_.all_gather(all, full({1}, value, {.dtype = DType::kFloat64}));
    const std::vector<double> values = all.to_vector<double>();
    return *std::max_element(values.begin(), values.end());
  }

  void save_checkpoint(const std::string& path, const nn::Module& model,
                       optim::Optimizer& optimizer) override {
    (void)model;
    // The one-process state on rank 0 (dp 0, pp 0, cp 0, tp 0), one whole tensor at a time
    // (collectives of the pp and tp groups of data-parallel replica 0's cp rank 0: the cp ranks
    // hold the same parameters).
    nn::StateDict all = trainer().gather_state(
        &optimizer, split_.get(), grid().coordinate("dp") == 0 && grid().coordinate("cp") == 0);
    if (rank() == 0) {
      for (auto& entry : nn::prefixed(ckpt::kMetadataPrefix, checkpoint_metadata())) {
        all.push_back(std::move(entry));
      }
      ckpt::save(path, all);
    }
    world_.barrier();  // the file is complete before any rank goes on
  }

  void load_checkpoint(const std::string& path, nn::Module& model,
                       optim::Optimizer& optimizer) override {
    (void)model;
    // Each rank reads the file and keeps its stages' parameters and moments (its tp parts).
    trainer().load_state(ckpt::load(path), &optimizer, split_.get());
  }

  void finish() override {
    trainer_.reset();
    split_.reset();
    replicas_.reset();
    grid_.reset();  // their groups go before MPI does
    dist::finalize();
  }

 private:
  const tp::ProcessGrid& grid() const {
    TT_CHECK(grid_ != nullptr, "the pipeline strategy \"pp\": set_pipeline must come first");
    return *grid_;
  }
  /// This rank's stages of `gpt` (who owns what depends on p and v only).
  GPT2Stages own_stages(gpt2::GPT2& gpt) const {
    const PipelineShape shape{spec_.stages, 1, spec_.chunks};
    return GPT2Stages(gpt, shape, grid().coordinate("pp"),
                      gpt2_stage_layers(gpt.config(), shape.virtual_stages(), costs_));
  }
  PipelineTrainer& trainer() const {
    TT_CHECK(trainer_ != nullptr,
             "the pipeline strategy \"pp\": make_step_runner must come "
             "before checkpoints");
    return *trainer_;
  }

  /// "pipeline 1f1b p=2 m=4 v=1 over ... : stage 0 = embedding + blocks 0-1 ...".
  std::string describe(int64_t B, int64_t accumulation) const {
    const PipelineShape& shape = trainer_->shape();
    std::string stages;
    const std::vector<StageLayers>& layers = trainer_->stages().layers();
    for (std::size_t s = 0; s < layers.size(); ++s) {
      const StageLayers& l = layers[s];
      const std::string blocks = l.end - l.begin == 1
                                     ? detail::str("block ", l.begin)
                                     : detail::str("blocks ", l.begin, "-", l.end - 1);
      stages += detail::str(
          s ? "; " : "", "stage ", s, " (pp rank ", place_of(shape, static_cast<int>(s)).rank,
          "): ", l.embedding ? "embedding + " : "", blocks, l.head ? " + head" : "");
    }
    return detail::str(
        "pipeline ", schedule_kind_name(kind_), " ", shape.str(), " (", spec_.micro_batches,
        " micro-batches of ", B / spec_.micro_batches, " rows per batch x ", accumulation,
        " batch(es) per step), grid dp=", grid().size("dp"), " x pp=", grid().size("pp"),
        " x cp=", grid().size("cp"), " x tp=", grid().size("tp"), " (tp innermost); ",
        cp_ > 1 ? detail::str("activations [", B / spec_.micro_batches, ", T/", cp_,
                              ", C] between the stages (each cp rank's zigzag shard); ")
                : std::string(),
        stages, "; ", describe_partition(partition_, costs_, trainer_->stages().layers()),
        "; theoretical bubble (p-1)/(vm+p-1) = ",
        bubble_fraction(shape.stages, shape.micro_batches, shape.chunks),
        "; each rank holds its stages' parameters only (",
        train::format_number(
            "%.2f", static_cast<double>(trainer_->stages().model().num_parameters()) / 1e6),
        "M on this rank): no text samples or llm.c export (resume the checkpoint in one "
        "process for those)");
  }

  dist::ProcessGroup& world_ = dist::world();
  int tp_ = 1;
  int cp_ = 1;
  gpt2::PipelineSpec spec_;
  ScheduleKind kind_ = ScheduleKind::kOneFOneB;
  PartitionKind partition_ = PartitionKind::kFlops;
  std::vector<double> costs_;  // the block costs cut by partition_by_cost (prepare_model sets
                               // them; measured: make_optimizer)
  std::unique_ptr<tp::ProcessGrid> grid_;
  std::unique_ptr<dist::ProcessGroup> replicas_;  // the dp x cp ranks of a stage (cp > 1)
  std::unique_ptr<tp::TensorParallelGPT2> split_;
  std::unique_ptr<PipelineTrainer> trainer_;
};

TT_REGISTER_PARALLEL_STRATEGY("pp", [] { return std::make_unique<PipelineStrategy>(); });

}  // namespace
}  // namespace tt::pp
