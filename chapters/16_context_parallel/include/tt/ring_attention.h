/// @file ring_attention.h
/// @brief Context parallelism (chapter 16): the sequence split over the ranks of a group, and
/// ring attention, which computes exact attention over the whole sequence while the K/V blocks
/// travel around the ring.
///
/// A global sequence of T positions is cut into chunks; rank r of N holds the positions of its
/// chunks (its shard, Tl = T / N positions), in increasing order:
///  - Layout::kContiguous: N chunks of T / N, rank r holds chunk r;
///  - Layout::kZigzag: 2N chunks of T / 2N, rank r holds chunks r and 2N-1-r. Under a causal mask
///    every rank then does the same work (one early and one late chunk).
///
/// Ring attention (forward): each rank keeps its queries; at step s = 0..N-1 it holds the K/V of
/// rank src = (r - s) mod N, computes the attention of its queries against that block (a part of
/// the softmax: an output and a log-sum-exp per row), merges it into its running result with the
/// log-sum-exp rule (merge_attention), and passes the block on to rank r + 1 while it computes
/// (ProcessGroup::batch_send_recv_async: MPI_Isend/Irecv on the CPU, NCCL on its own stream on
/// CUDA). The backward runs the same ring with the final output and log-sum-exp: every block's
/// dQ stays home, its dK and dV travel with the block and arrive home after N transfers.
///
/// The blocks are computed by attention_block_forward / attention_block_backward: a causal
/// diagonal block (the rank's own K/V) by chapter 10's FlashAttention kernels (float32 and
/// float64; the CUDA kernels for float32); a fully visible block of [Tq, Tk] (Tq != Tk under
/// the zigzag layout) in float32 and float64 by a composition of tensor operations (matmul, exp,
/// sum; chapter 11's full_attention_composed), which runs on every device but materializes the
/// block's scores. In bfloat16 both kinds run through chapter 11's bf16 FlashAttention (its
/// causal mode and its full, rectangular mode), and the ring on CUDA stays in bfloat16: K/V
/// travel in bf16 (NCCL), each block's output is widened to float32 and merged in float32 with
/// its lse (merge_attention_rows: one kernel on CUDA), and dQ, dK, dV are summed in float32
/// (add_rows: one kernel, reading the blocks' bf16 gradients) and dK, dV travel in float32;
/// each sum is rounded to bf16 once, dK and dV before their last hop home.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tt/dist.h"
#include "tt/tensor.h"

namespace tt::cp {

/// How a global sequence is cut into the shards of the ranks.
enum class Layout {
  kContiguous,  ///< N chunks; rank r holds chunk r (the naive split)
  kZigzag,      ///< 2N chunks; rank r holds chunks r and 2N-1-r (balanced under a causal mask)
};

/// "contiguous" or "zigzag".
const char* layout_name(Layout layout);
/// The Layout called `name` ("contiguous" or "zigzag"); throws tt::Error naming the choices.
Layout parse_layout(const std::string& name);
/// Number of chunks of the global sequence under `layout` over `world` ranks: N or 2N.
int64_t num_chunks(Layout layout, int world);

/// The zigzag index map (exercise ch16.2): the global position of local position `local` of
/// rank `rank` of `world` when a sequence of T positions is sharded with `layout`.
/// T must be a multiple of num_chunks(layout, world) and 0 <= local < T / world; the local
/// positions of a rank are its global positions in increasing order. Throws tt::Error naming the
/// arguments otherwise.
int64_t global_position(Layout layout, int64_t T, int rank, int world, int64_t local);

/// The global positions of rank `rank`'s shard, [T / world] values (global_position of every
/// local position).
std::vector<int64_t> shard_positions(Layout layout, int64_t T, int rank, int world);

/// A copy of rank `rank`'s shard of `x` along `dim`: the positions shard_positions() of the
/// size-T dim `dim`, in order (no autograd history). Throws tt::Error when T is not a multiple
/// of num_chunks(layout, world).
Tensor shard(const Tensor& x, int64_t dim, Layout layout, int rank, int world);

/// A part of an attention result over some of the keys: per query row, the output normalized
/// over those keys and the log-sum-exp of the row's (scaled, masked) scores over them.
struct AttentionPart {
  Tensor out;  ///< [B, NH, n, hs]: softmax over the part's keys, times their values
  Tensor lse;  ///< [B, NH, n]: log sum_j exp(s_ij) over the part's keys (float32 or float64)
};

/// The log-sum-exp merge (exercise ch16.1): the attention over the union of the keys of `a` and
/// `b` (disjoint sets, both covering at least one key of every row, so every lse is finite):
/// \f$ L = \log(e^{L_a} + e^{L_b}) \f$ and \f$ O = e^{L_a - L} O_a + e^{L_b - L} O_b \f$,
/// computed without overflow for any finite L_a, L_b. New tensors of a's shapes, dtype and
/// device; no autograd history. Throws tt::Error when the shapes, dtypes or devices differ.
AttentionPart merge_attention(const AttentionPart& a, const AttentionPart& b);

/// Merges `part` into rows [begin, begin + m) of the running result `acc`, in place: afterwards
/// those rows hold merge_attention(their old values, part) (the other rows are untouched).
/// acc.out [B, NH, Tl, hs] and acc.lse [B, NH, Tl] contiguous, float32 or float64; part.out
/// [B, NH, m, hs] of acc's dtype or bfloat16 (for a float32 acc), part.lse [B, NH, m] of acc's
/// dtype; one device. On CUDA with a float32 acc it is one kernel ("cp_merge_rows": a warp per
/// row reads both lse, writes the merged lse and re-weights the row), where merge_attention
/// takes ~20 element-wise passes and a copy; elsewhere it is merge_attention and a copy. Throws
/// tt::Error naming the tensors when they do not fit.
void merge_attention_rows(const AttentionPart& acc, int64_t begin, const AttentionPart& part);

/// Kernel "cp_merge_rows" of merge_attention_rows (CUDA; the tensors checked by the caller):
/// acc_out, acc_lse float32; part_out float32 or bfloat16, part_lse float32; all contiguous.
using MergeRowsKernel = void(const Tensor& acc_out, const Tensor& acc_lse, int64_t begin,
                             const Tensor& part_out, const Tensor& part_lse);

/// Adds `delta` [B, NH, m, hs] to rows [begin, begin + m) of `acc` [B, NH, Tl, hs] along dim 2,
/// in place: acc contiguous, float32 or float64; delta of acc's dtype or bfloat16 (for a
/// float32 acc: each value widened exactly). The ring's backward sums each block's dQ, dK and
/// dV this way. On CUDA with a float32 acc it is one kernel ("cp_add_rows"); elsewhere add and
/// copy. Throws tt::Error naming the tensors when they do not fit.
void add_rows(const Tensor& acc, int64_t begin, const Tensor& delta);

/// Kernel "cp_add_rows" of add_rows (CUDA; the tensors checked by the caller): acc float32 and
/// contiguous; delta float32 or bfloat16, contiguous or rows along dim 2 of a contiguous tensor
/// (unit stride along hs, rows hs apart; its heads delta.stride(1) apart).
using AddRowsKernel = void(const Tensor& acc, int64_t begin, const Tensor& delta);

/// The most scores a fully visible block materializes at once (B * NH * rows * n), 2^28 (1 GiB
/// of float32 per temporary): larger blocks are computed in pieces of query rows.
inline constexpr int64_t kMaxBlockScores = int64_t{1} << 28;

/// The attention of queries q [B, NH, m, hs] with keys and values k, v [B, NH, n, hs], scale
/// \f$ 1/\sqrt{hs} \f$: with `causal` (m = n, the block on the diagonal: query i sees keys
/// j <= i) through chapter 10's FlashAttention forward kernel; otherwise every query sees every
/// key (a composition of tensor operations on at most `max_scores` scores at a time). bfloat16
/// q, k, v: both kinds through chapter 11's bf16 FlashAttention (causal or full mode; hs 32, 64
/// or 128 on CUDA), and the part is float32 (out rounded to bf16 by the kernel, then widened;
/// lse float32), ready for a float32 merge. No autograd history.
AttentionPart attention_block_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                      bool causal, int64_t max_scores = kMaxBlockScores);

/// The gradients {dq, dk, dv} of one block's share of the attention, given the gradient `dout`
/// of the FINAL output `out` [B, NH, m, hs] and the final log-sum-exp `lse` [B, NH, m] of these
/// query rows (over all keys of the sequence): with \f$ P_{ij} = e^{S_{ij} - L_i} \f$ and
/// \f$ D_i = \sum_c dO_{ic} O_{ic} \f$, dV = P^T dO, dS = P (dO V^T - D) / sqrt(hs),
/// dQ = dS K, dK = dS^T Q. `causal` and `max_scores` as in attention_block_forward (the causal
/// block through chapter 10's backward kernel). bfloat16 q, k, v, dout, out (lse float32): chapter
/// 11's bf16 backward kernels of either mode, the gradients returned widened to float32.
std::array<Tensor, 3> attention_block_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                               const Tensor& v, const Tensor& out,
                                               const Tensor& lse, bool causal,
                                               int64_t max_scores = kMaxBlockScores);

/// Which queries of a rank see which keys of another rank's block, as one rectangle of local
/// rows: queries [q_begin, q_end) of this rank against keys [k_begin, k_end) of the block.
struct BlockPlan {
  /// What the rectangle holds.
  enum class Kind {
    kNone,    ///< no query sees any key of the block (an empty rectangle)
    kCausal,  ///< the rank's own block: all rows, the causal mask (global order = local order)
    kFull,    ///< every query of the rectangle sees every key of it
  };
  Kind kind = Kind::kNone;  ///< what the rectangle holds
  int64_t q_begin = 0;      ///< first query row (local)
  int64_t q_end = 0;        ///< one past the last query row
  int64_t k_begin = 0;      ///< first key row of the block (local to the block's owner)
  int64_t k_end = 0;        ///< one past the last key row
};

/// The plan of the block that rank `src` owns, seen from rank `rank`, for shards of Tl
/// positions under `layout` (Tl a multiple of the chunks per rank). Without `causal`: every
/// query sees every key (kFull over everything). With `causal`: kCausal for src == rank; for
/// the contiguous layout kFull everything when src < rank, else kNone; for the zigzag layout
/// kFull of all queries against the block's first chunk when src < rank, and of the rank's
/// second chunk against all the block's keys when src > rank (the same amount of work).
BlockPlan plan_block(Layout layout, bool causal, int rank, int src, int world, int64_t Tl);

/// What a ring step needs: the group, the layout and the mask.
struct RingContext {
  dist::ProcessGroup* group = nullptr;  ///< the context-parallel group (the ring)
  Layout layout = Layout::kZigzag;      ///< how the sequence is sharded over it
  bool causal = true;                   ///< causal mask (else every query sees every key)
  /// Rank that sends to this one: (rank - 1) mod N.
  int prev() const;
  /// Rank this one sends to: (rank + 1) mod N.
  int next() const;
};

/// A K/V block on its way around the ring.
struct KVBlock {
  Tensor k;  ///< [B, NH, Tl, hs]
  Tensor v;  ///< [B, NH, Tl, hs]
};

/// One step of the ring forward (exercise ch16.3). At step `step` (0..N-1) this rank holds in
/// `kv` the block of rank src = (rank - step) mod N. The step starts sending `kv` to next() and
/// receiving the following block from prev() (not at the last step), computes the attention of
/// the queries of `q` [B, NH, Tl, hs] with `kv` as plan_block() says, merges it into `acc` (at
/// step 0 `acc` is empty and becomes the diagonal block's result, which covers every row),
/// waits for the transfer, and returns the received block (empty after the last step).
KVBlock ring_forward_step(const RingContext& ctx, int step, const Tensor& q, const KVBlock& kv,
                          AttentionPart& acc);

/// Ring attention of this rank's shard: q, k, v [B, NH, Tl, hs] are the rows of the global
/// sequence that `layout` gives this rank of `group` (shard()); returns this rank's rows of
/// the attention over the whole sequence (causal or not), differentiable in q, k and v: the
/// backward passes dK, dV around the ring. Every rank of `group` must call it with the same
/// shapes (a collective). float32 or float64, CPU (MPI) or CUDA (NCCL; the causal diagonal
/// block through the CUDA FlashAttention kernels, float32, hs in {32, 64, 128}). bfloat16 on
/// CUDA: a bf16 ring (every block through chapter 11's bf16 FlashAttention, hs in {32, 64,
/// 128}; K/V sent in bf16; merge, dQ, dK, dV in float32; output and gradients bf16). bfloat16
/// on the CPU (MPI has no bf16 datatype): q, k, v converted to float32 for the ring and the
/// result back to bfloat16 (chapter 11's to_dtype: everything inside is float32). A group of one
/// rank computes ordinary attention. Throws tt::Error naming the shapes when q, k, v differ,
/// when Tl is not a multiple of the chunks per rank, or for another dtype.
Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, dist::ProcessGroup& group,
                      Layout layout = Layout::kZigzag, bool causal = true);

/// Attention of q, k, v [B, NH, T, hs] in one process, composed from tensor operations
/// (matmul, softmax; causal mask optional): the reference of the tests. Differentiable.
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, bool causal);

}  // namespace tt::cp
