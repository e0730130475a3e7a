/// @file pipeline_schedule.h
/// @brief Pipeline schedules as data: each rank's ordered list of forward, backward, send and
/// receive operations for AFAB (GPipe), 1F1B and interleaved 1F1B, a checker that plays the
/// lists of all ranks against each other, and the bubble of a schedule (chapter 14).
///
/// A model cut into p stages runs on p ranks; a step's batch is cut into m micro-batches that
/// stream through the stages. With v model chunks per rank (interleaved 1F1B) the layer stack
/// is cut into p*v **virtual stages**: virtual stage s runs on rank s % p as its chunk s / p,
/// so a micro-batch visits ranks 0, 1, ..., p-1, 0, 1, ... v times. Without interleaving
/// (v = 1) virtual stage s is rank s.
///
/// A schedule is one list per rank (RankSchedule): compute operations (F m / B m of chunk c)
/// and the transfers between them. The transfers that follow one compute operation form a
/// **batch**: the executor starts them together and waits for all (tt::dist::ProcessGroup::
/// batch_send_recv), so a rank that sends to and receives from the same peer never waits on the
/// order of the two calls. make_schedule() puts after each compute operation the send of its
/// output and the receive of the input of the rank's next compute operation (Megatron-LM's
/// send_forward_recv_backward and send_backward_recv_forward), e.g. on rank 0 of p = 2, m = 4:
/// @code
///   1F1B  F0 [sA0] F1 [sA1 rG0] B0 [rA..] ...   (sA = send activation, rG = receive gradient)
/// @endcode
/// check_schedules() replays the lists of all ranks with these semantics (a transfer completes
/// when the peer's current batch holds its match; the transfers between two ranks pair in list
/// order, as NCCL pairs them) and throws when one would deadlock or run an operation before its
/// input exists.
#pragma once

#include <string>
#include <vector>

namespace tt::pp {

/// What one entry of a rank's schedule does.
enum class OpKind {
  kForward,         ///< F: forward of a micro-batch through one chunk
  kBackward,        ///< B: backward of a micro-batch through one chunk
  kSendActivation,  ///< send a forward output to the next virtual stage
  kRecvActivation,  ///< receive a forward input from the previous virtual stage
  kSendGradient,    ///< send the gradient of a forward input to the previous virtual stage
  kRecvGradient,    ///< receive the gradient of a forward output from the next virtual stage
};

/// "F", "B", "sA", "rA", "sG", "rG".
const char* op_kind_name(OpKind kind);
/// True for kForward and kBackward (the operations that compute).
bool is_compute(OpKind kind);

/// One entry of a rank's schedule.
struct PipeOp {
  OpKind kind = OpKind::kForward;  ///< what it does
  int micro_batch = 0;             ///< which micro-batch, 0..m-1
  int chunk = 0;                   ///< which of the rank's model chunks, 0..v-1
  /// Equal kind, micro-batch and chunk.
  bool operator==(const PipeOp&) const = default;
  /// "F3", "B0", "sA3", "rG1"; chunks after the first get a suffix: "F3c1".
  std::string str() const;
};

/// A rank's ordered operations.
using RankSchedule = std::vector<PipeOp>;

/// The schedules of this chapter.
enum class ScheduleKind {
  kAfab,         ///< all forward, all backward (GPipe)
  kOneFOneB,     ///< one forward, one backward (PipeDream-Flush, Megatron's default)
  kInterleaved,  ///< 1F1B over v model chunks per rank (Megatron-LM 2021)
};

/// "afab", "1f1b", "interleaved".
const char* schedule_kind_name(ScheduleKind kind);
/// The kind named `name` ("afab", "1f1b" or "interleaved"); throws tt::Error listing them.
ScheduleKind parse_schedule_kind(const std::string& name);

/// The sizes a schedule is made for.
struct PipelineShape {
  int stages = 1;         ///< p: ranks of the pipeline
  int micro_batches = 1;  ///< m: micro-batches per step
  int chunks = 1;         ///< v: model chunks per rank (1 unless interleaved)

  /// p * v.
  int virtual_stages() const { return stages * chunks; }
  /// Throws tt::Error (naming the schedule and the sizes) when p, m or v < 1, when v != 1 for
  /// AFAB or 1F1B, or when interleaved gets p < 2, v < 2, or m not a multiple of p or below 2p
  /// (its micro-batches go round the ranks in groups of p; with m = p the order below
  /// deadlocks).
  void validate(ScheduleKind kind) const;
  /// "p=4 m=8 v=1".
  std::string str() const;
};

/// The compute operations of AFAB on `rank` (given code): F0 .. F(m-1), then B0 .. B(m-1).
std::vector<PipeOp> afab_order(int stages, int micro_batches, int rank);

/// The compute operations of 1F1B on `rank` (exercise ch14.1): a warm-up of forwards (the
/// later the stage, the fewer; none on the last), then a steady state that alternates one
/// forward and one backward, then a cool-down of backwards; micro-batches in order 0..m-1 in
/// each kind. Every F and B of the rank appears exactly once. Throws tt::Error when p or m < 1
/// or rank is not in 0..p-1.
std::vector<PipeOp> one_f_one_b_order(int stages, int micro_batches, int rank);

/// The compute operations of interleaved 1F1B on `rank` with `chunks` chunks per rank (given
/// code, Megatron-LM's order): forwards visit the chunks in groups of p micro-batches (chunk 0
/// for micro-batches 0..p-1, chunk 1 for them, ..., then the next p), backwards the chunks in
/// reverse; a warm-up of 2(p - rank - 1) + (v - 1)p forwards (at most m v), then 1F1B.
std::vector<PipeOp> interleaved_order(int stages, int micro_batches, int chunks, int rank);

/// The compute order of `kind` on `rank` (shape validated first).
std::vector<PipeOp> compute_order(ScheduleKind kind, const PipelineShape& shape, int rank);

/// `compute` (one rank's F/B order) with its transfers inserted: the receive of the first
/// operation's input before it, and after each operation a batch of the send of its output
/// (when another virtual stage needs it) and the receive of the next operation's input (when
/// it comes from another virtual stage). With chunks (v > 1), a forward followed by a backward
/// counts as one operation: their sends and the next receives form one batch after both
/// (Megatron's send_forward_backward_recv_forward_backward); transfers between them would
/// deadlock the interleaved order.
RankSchedule add_transfers(const std::vector<PipeOp>& compute, const PipelineShape& shape,
                           int rank);

/// add_transfers(compute_order(kind, shape, rank), shape, rank).
RankSchedule make_schedule(ScheduleKind kind, const PipelineShape& shape, int rank);

/// The ops of `schedule` as text separated by spaces, e.g. "F0 sA0 F1 sA1 rG0 B0 ..."; with
/// `compute_only` only F and B ("F0 F1 B0 F2 B1 ...", the textbook tables).
std::string format_schedule(const RankSchedule& schedule, bool compute_only = false);

/// Where a virtual stage runs.
struct StagePlace {
  int rank = 0;   ///< the rank, s % p
  int chunk = 0;  ///< the rank's chunk, s / p
};
/// The place of virtual stage `virtual_stage` (0..p*v-1).
StagePlace place_of(const PipelineShape& shape, int virtual_stage);
/// The virtual stage of `chunk` on `rank`: chunk * p + rank.
int virtual_stage_of(const PipelineShape& shape, int rank, int chunk);

/// The two ends of a transfer operation, as both sides agree on them.
struct Transfer {
  int peer = 0;           ///< the other rank
  int tag = 0;            ///< the same number on the sender's and the receiver's side
  bool send = false;      ///< this side sends (else it receives)
  bool gradient = false;  ///< a gradient (else an activation)
};
/// The peer and tag of transfer operation `op` on `rank`: an activation goes from virtual
/// stage s to s + 1, a gradient from s + 1 to s; the tag is 2 (s_recv m + micro_batch) (+1 for
/// a gradient), s_recv the receiving virtual stage. Throws tt::Error for a compute operation or
/// a transfer past the first or last virtual stage.
Transfer transfer_of(const PipeOp& op, const PipelineShape& shape, int rank);

/// One rank's operations timed by the idealized replay of check_schedules().
struct SimulatedOp {
  PipeOp op;         ///< the compute operation
  double start = 0;  ///< start time (units of the costs given)
  double end = 0;    ///< end time
};

/// Replays `schedules` (one per rank, shape.stages of them) against each other, as the
/// executor would run them, and returns each rank's compute operations with their times when
/// a forward through one chunk costs `forward_cost` and a backward `backward_cost` (transfers
/// cost nothing). Throws tt::Error naming the rank and the operation when a schedule misses or
/// repeats an F or B, runs one before its input exists, pairs transfers in different orders
/// on the two sides, or deadlocks (listing what every rank waits for).
std::vector<std::vector<SimulatedOp>> check_schedules(const std::vector<RankSchedule>& schedules,
                                                      const PipelineShape& shape,
                                                      double forward_cost = 1.0,
                                                      double backward_cost = 2.0);

/// The bubble fraction of the replay: the mean over the ranks of the time they do not compute,
/// as a fraction of the whole replay (from 0 to the last end).
double simulated_bubble(const std::vector<std::vector<SimulatedOp>>& timeline);

/// The theoretical bubble fraction of a pipeline of p stages, m micro-batches and v chunks per
/// rank (exercise ch14.4): the idle share of each rank's time, (p - 1) / (v m + p - 1), from
/// Narayanan et al. 2021 (bubble time (p - 1)(t_f + t_b)/v against m (t_f + t_b) of work).
/// Throws tt::Error when p, m or v < 1.
double bubble_fraction(int stages, int micro_batches, int chunks = 1);

}  // namespace tt::pp
