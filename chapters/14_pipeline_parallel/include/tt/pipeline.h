/// @file pipeline.h
/// @brief Pipeline parallelism: the layer stack cut into stages by cost, the executor that runs
/// any schedule of tt/pipeline_schedule.h with point-to-point transfers between the stages, its
/// timeline, and GPT-2 (chapter 09's model) trained as a pipeline, alone (PP), with data
/// parallelism (DP x PP), with tensor parallelism (DP x PP x TP) (chapter 14) and with chapter
/// 16's context parallelism (DP x PP x CP x TP: each stage's ranks hold 1/cp of every sequence).
///
/// One step of a pipeline rank, in the order PipelineTrainer::step runs it:
/// @code
///   zero the gradients of this rank's parameters
///   run_schedule: F and B of the rank's chunks for m micro-batches, activations and their
///                 gradients exchanged with the neighbours (ProcessGroup::batch_send_recv);
///                 the last virtual stage backpropagates loss / m (gradient accumulation)
///   tied embedding: wte's gradient summed between the first and the last stage
///   dp group (when given): every gradient averaged over the data-parallel replicas (with
///                 context parallelism: over the dp x cp ranks of this stage)
///   loss:  the last stage's mean, all-reduced over the pp group (the others add 0), then
///          averaged over the dp (x cp) group
///   norm:  sqrt of the sum over the pp group of each rank's sum of squares (wte once)
///   clip, and AdamW on the rank's own parameters when loss and norm are finite
/// @endcode
/// Each rank builds the whole GPT2 from the same seed (so the stages start as one model would),
/// then keeps only the parameters of its stages (GPT2Stages::keep_only_own_parameters: the
/// others become empty tensors), so its gradients, AdamW moments and bfloat16 weight copies
/// are its stages' too. gather_state() brings every tensor, one at a time, to rank 0 for a
/// one-process checkpoint that a pipeline of any size (or one process) resumes; load_state()
/// fills a rank's own parameters from one; evaluate() runs the validation loss through the
/// stages.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/dataloader.h"
#include "tt/dist.h"
#include "tt/gpt2.h"
#include "tt/optim.h"
#include "tt/pipeline_schedule.h"
#include "tt/tensor.h"
#include "tt/tp_gpt2.h"
#include "tt/train.h"

namespace tt::pp {

// ----- stage partitioning ------------------------------------------------------------------

/// Cuts `costs` (one per layer, >= 0) into `parts` contiguous non-empty runs whose largest sum
/// is as small as possible (exercise ch14.3). Returns parts + 1 boundaries b, b[0] = 0 < ... <
/// b[parts] = costs.size(): part i holds layers [b[i], b[i+1]). Ties are broken the same way
/// on every rank: each boundary in turn is the earliest after which the remaining layers are
/// still cut optimally, both for the whole and for what follows it (the layers after each
/// boundary are themselves cut with the smallest possible largest part). Throws tt::Error naming both counts when
/// parts < 1 or parts > costs.size() (more stages than layers), or when a cost is negative or
/// not finite.
std::vector<int> partition_by_cost(const std::vector<double>& costs, int parts);

/// The largest sum of a part of `costs` cut at `boundaries` (from partition_by_cost).
double max_part_cost(const std::vector<double>& costs, const std::vector<int>& boundaries);

/// `groups` (e.g. gpt2::param_groups of a model) with only the parameters in `keep`: the
/// optimizer groups of one pipeline rank.
std::vector<optim::ParamGroup> only_parameters(std::vector<optim::ParamGroup> groups,
                                               const std::vector<Tensor>& keep);

/// What one virtual stage of a GPT-2 holds.
struct StageLayers {
  int64_t begin = 0;       ///< first block
  int64_t end = 0;         ///< one past the last block
  bool embedding = false;  ///< wte and wpe (the first virtual stage)
  bool head = false;       ///< ln_f, the tied head and the loss (the last virtual stage)
};

/// Relative training cost of each of GPT-2's blocks at sequence length T (FLOPs per token of
/// forward + backward, as gpt2::flops_per_token counts them), with the head's (the C x V matmul
/// and the loss) added to the last block, so that a partition of the blocks also balances it.
/// The embedding is a lookup and counts no FLOPs in this model, so the first block's cost is a
/// block's: what the embedding really costs (its dense [V, C] gradient) only a measurement
/// sees (measure_gpt2_costs).
std::vector<double> gpt2_block_costs(const gpt2::GPT2Config& config, int64_t seq_len);

/// What measure_gpt2_costs timed: milliseconds of forward + backward of one micro-batch, the
/// median of the repeats, agreed by the ranks (see measure_gpt2_costs).
struct Gpt2MeasuredCosts {
  double embedding_ms = 0;   ///< embed(): wte lookup + wpe, and its backward into wte and wpe
  double block_ms = 0;       ///< one block that is not the last (all blocks have one shape)
  double last_block_ms = 0;  ///< the last block, ln_f, the tied head matmul and the loss

  /// The head alone (ln_f, head matmul, loss): last_block_ms - block_ms, at least 0.
  double head_ms() const;
  /// One cost per block of a model of `n_layer` blocks, in gpt2_block_costs' format: block_ms
  /// each, the embedding added to the first block, the last block last_block_ms (for one
  /// block: embedding_ms + last_block_ms). Throws tt::Error when n_layer < 1.
  std::vector<double> block_costs(int64_t n_layer) const;
};

/// Measures GPT-2's costs for a pipeline's partition: every rank of `group` (a collective)
/// builds a two-block GPT-2 of `config`'s shape (its width, heads and vocabulary) on `device`
/// with `ops` (the operation set the run trains with: float32, chapter 10's fused set, chapter
/// 11's bf16 mixed precision as the trainer builds it) and times, on micro-batches of `rows` x
/// `seq_len` random tokens, the forward + backward of the embedding, of the first block (a
/// middle block: a stage that ends there hands its residual stream on) and of the last block
/// with the head and the loss, each on its own. Two warm-up rounds come first (with `ops.adamw`
/// one AdamW step with lr 0 after the first, so the bfloat16 weight copies exist as in
/// training), then `repeats` timed rounds; each part's time is the median of its rounds, timed
/// with CUDA events on the device's compute stream on a GPU (ProcessGroup::mark, as the
/// Timeline) and by the host clock on the CPU. **How the ranks agree**: the three medians of
/// every rank are all-gathered over `group` and each part's cost is the median over the ranks
/// (the mean of the two middle ones for an even count), computed in the same order from the
/// same numbers on every rank, so every rank returns identical costs and partition_by_cost
/// (deterministic) cuts them identically. Throws tt::Error (on every rank alike, before any
/// collective) naming the device and shape when repeats < 1, rows < 1, seq_len is not in [1,
/// block_size], or `device` is a CUDA device this build or machine does not have.
Gpt2MeasuredCosts measure_gpt2_costs(dist::ProcessGroup& group, const gpt2::GPT2Config& config,
                                     Device device, const gpt2::ModelOps& ops, int64_t rows,
                                     int64_t seq_len, int repeats = 5);

/// measure_gpt2_costs(...).block_costs(config.n_layer): measured per-block costs in
/// milliseconds, identical on every rank of `group`, for PipelineOptions::block_costs.
std::vector<double> measure_gpt2_block_costs(dist::ProcessGroup& group,
                                             const gpt2::GPT2Config& config, Device device,
                                             const gpt2::ModelOps& ops, int64_t rows,
                                             int64_t seq_len, int repeats = 5);

/// How a pipeline's blocks are weighed before partition_by_cost cuts them.
enum class PartitionKind {
  kFlops,     ///< gpt2_block_costs (the FLOP model): the same on every run, nothing timed
  kMeasured,  ///< measure_gpt2_block_costs on the run's device and operations
  kUniform,   ///< 1 per block: as many blocks per stage as possible, the head ignored
};

/// "flops", "measured" or "uniform" to the kind; throws tt::Error naming the three otherwise.
PartitionKind parse_partition_kind(const std::string& name);
/// The kind's name ("flops", "measured", "uniform").
const char* partition_kind_name(PartitionKind kind);

/// The block costs of `kind` for a run of micro-batches [rows, seq_len] on `device` with `ops`
/// (only kMeasured uses the device and the ops, and only it is a collective of `group`): the
/// FLOP model at seq_len, the measured milliseconds, or 1 per block.
std::vector<double> gpt2_partition_costs(PartitionKind kind, dist::ProcessGroup& group,
                                         const gpt2::GPT2Config& config, Device device,
                                         const gpt2::ModelOps& ops, int64_t rows, int64_t seq_len);

/// The plan of a cut, one line: "partition <kind>: costs (<unit>) per block: ...; cut: stage 0 =
/// embedding + blocks 0-8 (cost); ...; predicted max stage X vs mean Y (max/mean R)", the unit
/// that of `kind`'s costs (FLOPs/token, ms or units). R is the step's predicted slowdown over
/// perfectly balanced stages. `layers` from gpt2_stage_layers(config, ..., costs).
std::string describe_partition(PartitionKind kind, const std::vector<double>& costs,
                               const std::vector<StageLayers>& layers);

/// The blocks of each of `virtual_stages` stages cut by partition_by_cost(costs) (costs: one per
/// block; gpt2_block_costs when empty); the first stage also holds the embedding, the last the
/// head. Throws tt::Error when there are more stages than blocks.
std::vector<StageLayers> gpt2_stage_layers(const gpt2::GPT2Config& config, int virtual_stages,
                                           const std::vector<double>& costs = {});

// ----- the executor --------------------------------------------------------------------------

/// The model side of one pipeline rank: its chunks (virtual stages), run by run_schedule().
class StageModule {
 public:
  virtual ~StageModule() = default;
  /// The forward of chunk `chunk` for micro-batch `micro_batch`. `input` is the activation
  /// received from the previous virtual stage (a leaf that requires grad), undefined on the
  /// first virtual stage (which reads its micro-batch itself). Returns the activation for the
  /// next virtual stage (of the shape agreed in ExecutorOptions), or, on the last virtual
  /// stage, the micro-batch's loss (a one-element tensor).
  virtual Tensor forward(int chunk, int micro_batch, const Tensor& input) = 0;
};

/// What one rank's executor holds between operations, per (micro-batch, chunk).
struct StageBuffers {
  /// Forward inputs received (rA), kept until their backward.
  std::map<std::pair<int, int>, Tensor> inputs;
  /// Forward outputs (sent by sA), kept until their backward; on the last virtual stage the
  /// scaled loss.
  std::map<std::pair<int, int>, Tensor> outputs;
  /// Gradients of the outputs, received (rG), used by the backward.
  std::map<std::pair<int, int>, Tensor> output_grads;
  /// Gradients of the inputs, made by the backward, sent by sG.
  std::map<std::pair<int, int>, Tensor> input_grads;
};

/// The point-to-point transfers of one batch of transfer operations `batch` of `rank`
/// (exercise ch14.2), for ProcessGroup::batch_send_recv. A send (sA, sG) sends the contiguous
/// data of the tensor `buffers` holds for it (the output, or the input's gradient); a receive
/// (rA, rG) gets a new buffer of `shape` and `options`, stored in `buffers` where the next F or
/// B will find it (inputs, output_grads). Peers and tags come from transfer_of(). Throws
/// tt::Error naming the operation when a send has nothing to send.
std::vector<dist::P2POp> exchange_ops(const std::vector<PipeOp>& batch,
                                      const PipelineShape& pipeline, int rank,
                                      StageBuffers& buffers, const Shape& shape,
                                      const TensorOptions& options);

/// One operation of a rank's measured timeline.
struct TimelineEvent {
  PipeOp op;            ///< the compute operation, or the first transfer of a batch
  std::string label;    ///< "F3", "B0c1", or the batch's transfers ("sA0+rG1")
  double start_ms = 0;  ///< start, from the step's begin
  double end_ms = 0;    ///< end, from the step's begin
};

/// A rank's operations in one step, timed on its device (CUDA events) or on the host clock.
struct Timeline {
  int rank = 0;                       ///< the rank in the pipeline group
  double span_ms = 0;                 ///< the step, from a barrier before to a barrier after
  std::vector<TimelineEvent> events;  ///< in execution order

  /// Milliseconds spent in F and B.
  double busy_ms() const;
  /// 1 - busy_ms() / span_ms: the share of the step this rank did not compute.
  double bubble() const;
};

/// The replay of check_schedules() as a Timeline of `rank` (1 unit = `unit_ms`): the
/// theoretical schedule drawn next to the measured one.
Timeline simulated_timeline(const std::vector<SimulatedOp>& ops, int rank, double unit_ms = 1.0);

/// Writes `timeline` as CSV: a header line, then one line per event
/// "rank,kind,label,micro_batch,chunk,start_ms,end_ms" (kind: F, B or X for transfers).
void write_timeline_csv(const Timeline& timeline, const std::string& path);

/// Writes a gnuplot script that draws the CSV file `csv` as boxes on a time axis (F, B and the
/// transfers in three colours, labelled) into the PNG file `png`, titled `title`.
void write_gnuplot_script(const std::string& script, const std::string& csv, const std::string& png,
                          const std::string& title);

/// Runs `gnuplot script` when gnuplot is installed; returns false (after printing why to
/// stderr) when it is not or when it fails.
bool run_gnuplot(const std::string& script);

/// How run_schedule runs.
struct ExecutorOptions {
  Shape activation_shape;            ///< every transferred tensor's shape, e.g. [B, T, C]
  TensorOptions activation_options;  ///< their dtype and device
  bool timeline = false;             ///< record a Timeline (barriers before and after)
};

/// What run_schedule measured.
struct ExecutorResult {
  double loss_sum = 0;     ///< sum of the micro-batch losses (last virtual stage; else 0)
  int peak_in_flight = 0;  ///< most micro-batch chunks whose forward ran and backward did not
  Timeline timeline;       ///< when ExecutorOptions::timeline
};

/// Runs `schedule` (this rank's list, e.g. from make_schedule) for `stage` on `group` (the
/// pipeline's ranks, rank i = stage i): each F calls stage.forward; on the last virtual stage
/// it keeps loss / m and each B backpropagates it (so the gradients accumulate to those of the
/// mean loss), elsewhere B backpropagates the received output gradient; each run of transfers
/// is one batch (exchange_ops, batch_send_recv). Leaves the gradients in the parameters.
/// Throws tt::Error naming the rank and the operation when an F returns a tensor of another
/// shape than agreed, or a B finds no gradient of its input. A wrong schedule deadlocks: the
/// group's watchdog ends the process (check it first with check_schedules()).
ExecutorResult run_schedule(dist::ProcessGroup& group, const RankSchedule& schedule,
                            const PipelineShape& shape, StageModule& stage,
                            const ExecutorOptions& options);

/// Connects `group`'s rank to every peer its `schedule` sends to or receives from: one batch
/// of one transfer of a zeroed [options.activation_shape] tensor per (peer, direction), which
/// every rank of the group calls once before its first run_schedule. NCCL connects two ranks
/// lazily, at their first transfer, by a handshake of the two hosts; left to the middle of a
/// schedule, that handshake can wait on a peer whose host waits on its GPU, which waits on the
/// transfer being set up. AFAB hung on four H100s until every link was connected first; the
/// likely cycle: the previous stage's batch of its last activation send and first gradient
/// receive met a last stage whose host waited for that activation. Here every rank connects at
/// the same point, with nothing queued behind it. Returns the number of
/// transfers (0 for one stage); MPI needs no connection, the batch only costs a round trip.
int connect_peers(dist::ProcessGroup& group, const RankSchedule& schedule,
                  const PipelineShape& shape, const ExecutorOptions& options);

// ----- GPT-2 as a pipeline -------------------------------------------------------------------

/// This rank's chunks of a GPT-2: the blocks of its virtual stages, the embedding on the first
/// virtual stage, ln_f, the tied head and the loss on the last (through the model's own
/// embed(), run_blocks() and loss_from_hidden(), so with the model's operation set: chapter
/// 09's Block::forward, chapters 10-11's fused loop, chapter 13's split layers).
class GPT2Stages : public StageModule {
 public:
  /// The chunks of `rank` in `shape` of `model` cut as `layers` (one per virtual stage, e.g.
  /// gpt2_stage_layers). The model must outlive this object.
  GPT2Stages(gpt2::GPT2& model, const PipelineShape& shape, int rank,
             std::vector<StageLayers> layers);
  /// The micro-batches of the step (m of them, on the model's device).
  void set_micro_batches(std::vector<Batch> batches);
  /// See StageModule::forward: run_stage of the chunk's virtual stage on the micro-batch.
  Tensor forward(int chunk, int micro_batch, const Tensor& input) override;
  /// Virtual stage `stage` (one of this rank's) on `batch`: the embedding of its inputs on the
  /// first virtual stage, else `input` (the previous virtual stage's output), through the
  /// stage's blocks; on the last virtual stage the loss against its targets, else the hidden
  /// states [B, T, C].
  Tensor run_stage(int stage, const Batch& batch, const Tensor& input);
  /// The parameters this rank holds without training them: for each of its virtual stages that
  /// ends before the last block, the next block's ln_1 (2C numbers). Chapter 09's fused loop
  /// (GPT2::run_blocks under an operation set that fuses each residual add with the LayerNorm
  /// that follows) computes a stage's last add with it and drops the normalized output, so its
  /// values do not matter, only its shape.
  std::vector<Tensor> boundary_parameters() const;
  /// Releases the memory of every parameter of the model this rank neither trains nor needs at
  /// a boundary (parameters(), boundary_parameters()): each becomes an empty tensor of the same
  /// dtype, device and number of dimensions (every size 0) in place (tp::replace_, so every
  /// handle sees it), its gradient dropped. Afterwards the model holds this rank's stages only
  /// (what optimizers, gradients and weight copies are made of); the whole model is gone from
  /// this rank. Idempotent.
  void keep_only_own_parameters();
  /// The virtual stage that owns parameter `name` of the model ("wte.weight": the first; it is
  /// also used by the last, whose gradient is added to the first's).
  int owner_of(const std::string& name) const;
  /// The model's parameters this rank trains (wte on the ranks of the first and last virtual
  /// stages), in the model's order: after keep_only_own_parameters(), the ones it holds.
  std::vector<Tensor> parameters() const;
  /// gpt2::param_groups of the model, restricted to parameters().
  std::vector<optim::ParamGroup> param_groups(double weight_decay) const;
  /// The virtual stages, one per stage of the pipeline.
  const std::vector<StageLayers>& layers() const { return layers_; }
  /// The model.
  gpt2::GPT2& model() const { return model_; }

 private:
  gpt2::GPT2& model_;
  PipelineShape shape_;
  int rank_;
  std::vector<StageLayers> layers_;
  std::vector<Batch> batches_;
};

/// A model's operations wrapped for context parallelism over a group (chapter 16's
/// tt::cp::context_parallel_ops in the zigzag layout): what makes a pipeline's stages hold 1/cp
/// of every sequence (the strategy "pp" under train_gpt2 --pp P --cp K).
using ContextParallelWrap = std::function<gpt2::ModelOps(gpt2::ModelOps, dist::ProcessGroup&)>;

/// Registers `wrap` as the context-parallel wrapping of the strategy "pp" (chapter 16 does, at
/// static-initialization time; chapter 14 comes before it and cannot call it). Returns true.
/// Throws tt::Error when `wrap` is empty or one is registered already.
bool register_context_parallel_wrap(ContextParallelWrap wrap);

/// The registered context-parallel wrapping; throws tt::Error saying that --cp needs chapter 16
/// when none is registered (chapter 16 not linked in).
const ContextParallelWrap& context_parallel_wrap();

/// The pipeline and (optional) data-parallel groups of a rank and the settings of its steps.
struct PipelineOptions {
  ScheduleKind schedule = ScheduleKind::kOneFOneB;  ///< afab, 1f1b or interleaved
  int micro_batches = 1;                            ///< m per step
  int chunks = 1;                                   ///< v (interleaved only)
  double max_grad_norm = 1.0;                       ///< clipping (<= 0: none)
  /// Per block (gpt2_partition_costs: the FLOP model, measured milliseconds or uniform), cut by
  /// partition_by_cost; empty: gpt2_block_costs at the model's block_size. Every rank of the
  /// pipeline (and of its data-parallel replicas) must pass the same costs.
  std::vector<double> block_costs;
  bool timeline = false;  ///< record each step's Timeline
  /// The tensor-parallel group when the model is split by chapter 13's TensorParallelGPT2
  /// (3D: DP x PP x TP); null: no tensor parallelism. The gradient norm then sums the parts of
  /// split parameters over it and counts replicated ones once.
  dist::ProcessGroup* tp = nullptr;
  /// The context-parallel group when every sequence is split over it (DP x PP x CP x TP): the
  /// model's operations wrapped by context_parallel_wrap() over this group, so each rank of a
  /// stage holds T/cp positions of every micro-batch and the activations sent between the
  /// stages are [B, T/cp, C]; the `dp` group given to PipelineTrainer must then hold the dp x
  /// cp ranks of this stage (gradients and the loss averaged over both). Null: whole sequences.
  dist::ProcessGroup* cp = nullptr;
};

/// Trains a GPT-2 as a pipeline over `pp` (rank i of pp runs stage i), each micro-batch [B, T];
/// with `dp`, also data-parallel over it (each dp replica has its own batches); with
/// options.tp, a model split by chapter 13's TensorParallelGPT2 over that group (the ranks of
/// one tp group run the same stage, and their pipelines exchange their activations, which are
/// whole [B, T, C] on every tp rank); with options.cp, each sequence split over that group
/// (activations [B, T/cp, C], `dp` the dp x cp ranks). Every rank of the world must construct it at the same time
/// (it splits `pp` into the tied-embedding group). The model keeps only this rank's stages'
/// parameters (GPT2Stages::keep_only_own_parameters, from the constructor on). train_gpt2 --pp
/// runs it through the ParallelStrategy "pp" (src/pp_strategy.cc), which releases the other
/// parameters earlier, before the model moves to its device.
class PipelineTrainer {
 public:
  /// The stages of `model` (on its device) for `options`, activations [B, T, C] (with
  /// options.cp: [B, T/cp, C]) of the model's float dtype; releases the parameters of the other
  /// ranks' stages. Throws tt::Error (on every rank alike) for a schedule whose shape does not
  /// validate, more virtual stages than blocks, or (with options.cp) T not divisible by 2 cp.
  PipelineTrainer(gpt2::GPT2& model, dist::ProcessGroup& pp, dist::ProcessGroup* dp,
                  PipelineOptions options, int64_t B, int64_t T);
  /// One optimizer step (the sequence in the file comment) on options.micro_batches batches
  /// from `next_batch` (called m times on every rank). `optimizer` holds param_groups().
  gpt2::TrainStepResult step(optim::Optimizer& optimizer, const std::function<Batch()>& next_batch);
  /// The optimizer groups of this rank's parameters.
  std::vector<optim::ParamGroup> param_groups(double weight_decay) const {
    return stages_.param_groups(weight_decay);
  }
  /// The mean loss of `num_batches` batches from `next_batch` (called on every rank; each batch
  /// [rows, T] whole, not cut into micro-batches) run forward through the virtual stages in
  /// order without gradients: what gpt2::evaluate computes in one process, returned on every
  /// rank of pp (a collective of pp, and with options.cp of the cp group, whose shards' means
  /// are averaged; with dp, each replica's own batches).
  double evaluate(const std::function<Batch()>& next_batch, int64_t num_batches);
  /// The one-process checkpoint state, whole tensors on the CPU, in ckpt::checkpoint_state's
  /// layout: "model.<name>" for every parameter and buffer, and, when `local` (this rank's
  /// optimizer, over param_groups()) is given, "optimizer.<key>" of the same optimizer over
  /// gpt2::param_groups(model) (each parameter's moments from the rank that trains it; the step
  /// count and learning rate from `local`). Returned on rank 0 of pp when `collect`, else
  /// empty. A collective of pp, and with `split` (chapter 13's TensorParallelGPT2 of this
  /// model) of its tp group: each tensor is made whole over tp on its stage's ranks, then sent
  /// to pp rank 0 (of tp rank 0 only), one tensor at a time, so no rank holds more than one
  /// whole tensor beyond its stages on its device. The ranks of a pp group must agree on
  /// `collect` (the strategy passes true for data-parallel replica 0 only).
  nn::StateDict gather_state(const optim::Optimizer* local,
                             const tp::TensorParallelGPT2* split = nullptr, bool collect = true);
  /// The reverse, without communication: copies from `state` (gather_state's layout, e.g.
  /// ckpt::load of a checkpoint) into the parameters this rank holds (their parts, with
  /// `split`), every buffer, and when `local` is given its moments, step count and learning
  /// rate. Throws tt::Error naming the key when `state` lacks one, or a shape differs.
  void load_state(const nn::StateDict& state, optim::Optimizer* local,
                  const tp::TensorParallelGPT2* split = nullptr);
  /// This rank's stages.
  GPT2Stages& stages() { return stages_; }
  /// The schedule this rank runs.
  const RankSchedule& schedule() const { return schedule_; }
  /// What the last step's executor measured.
  const ExecutorResult& last() const { return last_; }
  /// The pipeline's shape.
  const PipelineShape& shape() const { return shape_; }

 private:
  gpt2::GPT2& model_;
  dist::ProcessGroup& pp_;
  dist::ProcessGroup* dp_;
  PipelineOptions options_;
  PipelineShape shape_;
  GPT2Stages stages_;
  RankSchedule schedule_;
  ExecutorOptions exec_;
  std::unique_ptr<dist::ProcessGroup> tied_;  // first and last stage (wte), when p > 1
  std::vector<Tensor> replicated_;  // with options_.tp: the parameters every tp rank holds whole
  ExecutorResult last_;
};

}  // namespace tt::pp
