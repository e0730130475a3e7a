// Ring attention (tt/ring_attention.h): the layouts, the attention of one block (forward and
// backward), the plan of which rows see which keys, and the autograd Function whose forward is
// the ring of ring_forward_step (exercise ch16.3) and whose backward sends dK, dV around the
// ring. The exercises ch16.1 (merge_attention) and ch16.2 (global_position) are in their own
// files.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/error.h"
#include "tt/flash_attention.h"
#include "tt/flash_attention_bf16.h"
#include "tt/functional.h"
#include "tt/mixed_precision.h"
#include "tt/ring_attention.h"

namespace tt::cp {

const char* layout_name(Layout layout) {
  return layout == Layout::kZigzag ? "zigzag" : "contiguous";
}

Layout parse_layout(const std::string& name) {
  if (name == "zigzag") return Layout::kZigzag;
  if (name == "contiguous") return Layout::kContiguous;
  TT_THROW("context parallel: unknown layout '", name, "' (choose zigzag or contiguous)");
}

int64_t num_chunks(Layout layout, int world) {
  TT_CHECK(world >= 1, "context parallel: the group must have at least one rank, got ", world);
  return layout == Layout::kZigzag ? 2 * int64_t{world} : int64_t{world};
}

std::vector<int64_t> shard_positions(Layout layout, int64_t T, int rank, int world) {
  const int64_t Tl = T / world;
  std::vector<int64_t> out(static_cast<std::size_t>(Tl));
  for (int64_t i = 0; i < Tl; ++i) out[i] = global_position(layout, T, rank, world, i);
  return out;
}

Tensor shard(const Tensor& x, int64_t dim, Layout layout, int rank, int world) {
  TT_CHECK(x.defined() && dim >= 0 && dim < x.dim(), "cp::shard: dim ", dim, " out of range for ",
           x.defined() ? x.describe() : std::string("(undefined)"));
  const int64_t T = x.size(dim), chunks = num_chunks(layout, world);
  TT_CHECK(T % chunks == 0, "cp::shard: the ", layout_name(layout), " layout over ", world,
           " ranks cuts dim ", dim, " into ", chunks, " chunks, which does not divide ", T, " in ",
           x.describe());
  Shape shape = x.shape();
  shape[dim] = T / world;
  Tensor out = empty(shape, {x.dtype(), x.device()});
  // The positions come in runs of one chunk: copy chunk by chunk.
  const int64_t c = T / chunks, Tl = T / world;
  for (int64_t i = 0; i < Tl; i += c) {
    const int64_t g = global_position(layout, T, rank, world, i);
    out.slice(dim, i, i + c).copy_(x.slice(dim, g, g + c));
  }
  return out;
}

namespace {

// `t` with the row-major strides of its shape, as FlashAttention's kernels want every tensor of a
// group (q, k, v and their gradients; out and dout) to share one set: contiguous() keeps any
// stride of a size-1 dimension, e.g. the heads of a permuted [B, 1, T, hs] when tensor
// parallelism leaves one head per rank (CP x TP).
Tensor row_major(const Tensor& t) {
  return t.strides() == contiguous_strides(t.shape()) ? t : t.clone();
}

// q, k, v of one attention call: 4-D, one dtype and device, k and v of one shape, q of k's
// batch, heads and head size.
void check_block(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  TT_CHECK(q.defined() && k.defined() && v.defined() && q.dim() == 4 && k.dim() == 4 &&
               k.shape() == v.shape() && q.size(0) == k.size(0) && q.size(1) == k.size(1) &&
               q.size(3) == k.size(3) && k.dtype() == q.dtype() && v.dtype() == q.dtype() &&
               k.device() == q.device() && v.device() == q.device(),
           op,
           ": expected q [B, NH, m, hs] and k, v [B, NH, n, hs] of one dtype and device, got q ",
           q.defined() ? q.describe() : "(undefined)", ", k ",
           k.defined() ? k.describe() : "(undefined)", ", v ",
           v.defined() ? v.describe() : "(undefined)");
  TT_CHECK(
      q.dtype() == DType::kFloat32 || q.dtype() == DType::kFloat64 || q.dtype() == DType::kBFloat16,
      op, ": float32, float64 or bfloat16 tensors only, got ", q.describe());
}

// The dtype in which the parts and the gradients of blocks of `dtype` are accumulated: float32
// for bfloat16 (the merge and the sums of the ring), else the dtype itself.
DType accumulation_dtype(DType dtype) {
  return dtype == DType::kBFloat16 ? DType::kFloat32 : dtype;
}

// `t` in the accumulation dtype (a no-op unless bfloat16).
Tensor widen(const Tensor& t) {
  return t.dtype() == DType::kBFloat16 ? t.to(DType::kFloat32) : t;
}

// Query rows per piece of a fully visible block of q [B, NH, m, hs] against n keys (>= 1), for
// at most max_scores scores per piece.
int64_t rows_per_piece(const Tensor& q, int64_t n, int64_t max_scores) {
  return std::max<int64_t>(1, max_scores / std::max<int64_t>(1, q.size(0) * q.size(1) * n));
}

// The attention of every query of q with every key of k, v: the softmax of the [m, n] scores
// (chapter 11's composition of tensor operations).
AttentionPart full_block_forward(const Tensor& q, const Tensor& k, const Tensor& v) {
  const std::array<Tensor, 2> r = full_attention_composed(q, k, v);
  return {r[0], r[1]};
}

// The attention of a block through the FlashAttention forward kernel of `kernels` (chapter
// 10's causal one, or chapter 11's bf16 causal or full mode); a bfloat16 out is widened to
// float32 (the lse is float32 already), so that the parts merge in float32.
AttentionPart kernel_block_forward(const FlashKernels& kernels, const Tensor& q, const Tensor& k,
                                   const Tensor& v) {
  const Tensor out = empty(q.shape(), {q.dtype(), q.device()});
  const Tensor lse = empty({q.size(0), q.size(1), q.size(2)}, {kernels.lse_dtype, q.device()});
  call_kernel<FlashAttentionForwardKernel>(kernels.forward, q.device(), out, lse, q, k, v);
  return {widen(out), lse};
}

}  // namespace

AttentionPart attention_block_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                      bool causal, int64_t max_scores) {
  check_block("cp::attention_block_forward", q, k, v);
  autograd::NoGradGuard no_grad;
  if (causal) {
    TT_CHECK(q.size(2) == k.size(2),
             "cp::attention_block_forward: a causal block is square, got q ", q.describe(),
             " and k ", k.describe());
    return kernel_block_forward(flash_kernels(q.dtype()), row_major(q), row_major(k), row_major(v));
  }
  // bfloat16: chapter 11's FlashAttention in its full mode (no [m, n] scores in memory). Its
  // kernels read strided views: q (a group of its own) and k, v (slices of one block: shared
  // strides) go in as they are.
  if (q.dtype() == DType::kBFloat16) {
    return kernel_block_forward(flash_attention_bf16_full_kernels(), q, k, v);
  }
  // Every query sees every key: the softmax of [rows, n] scores at once, for pieces of at most
  // max_scores scores (the whole block when it is small).
  const int64_t m = q.size(2), rows = rows_per_piece(q, k.size(2), max_scores);
  if (rows >= m) return full_block_forward(q, k, v);
  const FlashKernels kernels = flash_kernels(q.dtype());
  AttentionPart part{empty(q.shape(), {q.dtype(), q.device()}),
                     empty({q.size(0), q.size(1), m}, {kernels.lse_dtype, q.device()})};
  for (int64_t i = 0; i < m; i += rows) {
    const int64_t end = std::min(m, i + rows);
    const AttentionPart piece = full_block_forward(q.slice(2, i, end), k, v);
    part.out.slice(2, i, end).copy_(piece.out);
    part.lse.slice(2, i, end).copy_(piece.lse);
  }
  return part;
}

namespace {

// Whether t [B, NH, m, hs] is rows [r, r + m) along dim 2 of a contiguous [B, NH, S, hs] tensor:
// unit stride along hs, rows hs apart, heads S * hs apart, batches NH heads apart. Chapter 11's
// bf16 kernels in their full mode and the ring's add_rows read such views in place.
bool rows_of_contiguous(const Tensor& t) {
  const int64_t hs = t.size(3);
  return t.stride(3) == 1 && t.stride(2) == hs && t.stride(1) % hs == 0 &&
         t.stride(1) >= t.size(2) * hs && t.stride(0) == t.size(1) * t.stride(1);
}

// An uninitialized tensor of t's shape with t's strides when t is rows_of_contiguous (rows
// [0, m) of a new [B, NH, S, hs] tensor), else contiguous: a gradient the kernels write with the
// strides of the tensor it is the gradient of.
Tensor empty_rows_like(const Tensor& t) {
  if (!rows_of_contiguous(t)) return empty(t.shape(), {t.dtype(), t.device()});
  return empty({t.size(0), t.size(1), t.stride(1) / t.size(3), t.size(3)}, {t.dtype(), t.device()})
      .slice(2, 0, t.size(2));
}

// attention_block_backward; `widen_bf16` false leaves bfloat16 gradients in bfloat16 (the ring
// adds them to its float32 sums with add_rows, which widens as it reads).
std::array<Tensor, 3> block_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& lse,
                                     bool causal, int64_t max_scores, bool widen_bf16) {
  check_block("cp::attention_block_backward", q, k, v);
  TT_CHECK(dout.defined() && out.defined() && lse.defined() && dout.shape() == q.shape() &&
               out.shape() == q.shape() && lse.dim() == 3 && lse.size(2) == q.size(2),
           "cp::attention_block_backward: dout and out must have q's shape ", q.describe(),
           " and lse [B, NH, m], got dout ", dout.defined() ? dout.describe() : "(undefined)",
           ", out ", out.defined() ? out.describe() : "(undefined)", ", lse ",
           lse.defined() ? lse.describe() : "(undefined)");
  autograd::NoGradGuard no_grad;
  TT_CHECK(!causal || q.size(2) == k.size(2),
           "cp::attention_block_backward: a causal block is square, got q ", q.describe(),
           " and k ", k.describe());
  const bool bf16 = q.dtype() == DType::kBFloat16;
  if (causal || bf16) {  // the FlashAttention kernels: causal, or bfloat16 in the full mode
    // The full mode on CUDA reads rows of q, k, v, out and dout in place (the rectangles of the
    // zigzag ring are such rows) and writes each gradient with its tensor's strides; the causal
    // kernels (and the CPU emulation) take row-major tensors.
    const bool views = bf16 && !causal && q.device().is_cuda() && rows_of_contiguous(q) &&
                       rows_of_contiguous(k) && v.strides() == k.strides() &&
                       rows_of_contiguous(dout) && out.strides() == dout.strides();
    auto in = [views](const Tensor& t) { return views ? t : row_major(t); };
    const Tensor qc = in(q), kc = in(k), vc = in(v);
    std::array<Tensor, 3> g{empty_rows_like(qc), empty_rows_like(kc), empty_rows_like(kc)};
    const char* kernel =
        causal ? flash_kernels(q.dtype()).backward : flash_attention_bf16_full_kernels().backward;
    call_kernel<FlashAttentionBackwardKernel>(kernel, q.device(), g[0], g[1], g[2], in(dout), qc,
                                              kc, vc, in(out), lse.contiguous());
    if (bf16 && widen_bf16) {
      for (Tensor& t : g) t = widen(t);
    }
    return g;
  }
  const int64_t m = q.size(2), rows = rows_per_piece(q, k.size(2), max_scores);
  if (rows >= m) return full_attention_composed_backward(dout, q, k, v, out, lse);
  std::array<Tensor, 3> g{empty(q.shape(), {q.dtype(), q.device()}), zeros_like(k), zeros_like(v)};
  for (int64_t i = 0; i < m; i += rows) {
    const int64_t end = std::min(m, i + rows);
    auto r = [&](const Tensor& t) { return t.slice(2, i, end); };
    const std::array<Tensor, 3> piece =
        full_attention_composed_backward(r(dout), r(q), k, v, r(out), lse.slice(2, i, end));
    g[0].slice(2, i, end).copy_(piece[0]);
    g[1].copy_(add(g[1], piece[1]));
    g[2].copy_(add(g[2], piece[2]));
  }
  return g;
}

// The geometry add_rows and merge_attention_rows need: acc [B, NH, Tl, hs] in float32 or
// float64, delta [B, NH, m, hs] of acc's batch, heads and head size, rows [begin, begin + m)
// inside Tl, delta of acc's dtype or bfloat16 for a float32 acc, one device.
void check_rows(const char* op, const Tensor& acc, int64_t begin, const Tensor& delta) {
  TT_CHECK(acc.defined() && delta.defined() && acc.dim() == 4 && delta.dim() == 4 &&
               acc.size(0) == delta.size(0) && acc.size(1) == delta.size(1) &&
               acc.size(3) == delta.size(3) && begin >= 0 && begin + delta.size(2) <= acc.size(2) &&
               acc.device() == delta.device() &&
               (acc.dtype() == DType::kFloat32 || acc.dtype() == DType::kFloat64) &&
               (delta.dtype() == acc.dtype() ||
                (delta.dtype() == DType::kBFloat16 && acc.dtype() == DType::kFloat32)),
           op, ": expected acc [B, NH, Tl, hs] (float32 or float64) and [B, NH, m, hs] rows of ",
           "its dtype (or bfloat16 for float32) on its device, with begin + m <= Tl; got acc ",
           acc.describe(), ", rows ", delta.describe(), ", begin ", begin);
}

// Whether `op` runs as one kernel: a float32 accumulator, contiguous, on a device that has it.
bool fused(const char* op, const Tensor& acc) {
  return acc.dtype() == DType::kFloat32 && acc.is_contiguous() &&
         KernelRegistry::instance().has(op, acc.device().type);
}

}  // namespace

std::array<Tensor, 3> attention_block_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                               const Tensor& v, const Tensor& out,
                                               const Tensor& lse, bool causal, int64_t max_scores) {
  return block_backward(dout, q, k, v, out, lse, causal, max_scores, /*widen_bf16=*/true);
}

void add_rows(const Tensor& acc, int64_t begin, const Tensor& delta) {
  check_rows("cp::add_rows", acc, begin, delta);
  if (fused("cp_add_rows", acc)) {
    call_kernel<AddRowsKernel>("cp_add_rows", acc.device(), acc, begin,
                               rows_of_contiguous(delta) ? delta : delta.contiguous());
    return;
  }
  autograd::NoGradGuard no_grad;
  const Tensor rows = acc.slice(2, begin, begin + delta.size(2));
  rows.copy_(add(rows, delta.to(acc.dtype())));
}

void merge_attention_rows(const AttentionPart& acc, int64_t begin, const AttentionPart& part) {
  check_rows("cp::merge_attention_rows", acc.out, begin, part.out);
  const int64_t m = part.out.size(2);
  TT_CHECK(acc.lse.defined() && part.lse.defined() && acc.lse.dim() == 3 && part.lse.dim() == 3 &&
               acc.lse.size(0) == acc.out.size(0) && acc.lse.size(1) == acc.out.size(1) &&
               acc.lse.size(2) == acc.out.size(2) && part.lse.size(0) == acc.out.size(0) &&
               part.lse.size(1) == acc.out.size(1) && part.lse.size(2) == m &&
               acc.lse.dtype() == acc.out.dtype() && part.lse.dtype() == acc.out.dtype() &&
               acc.lse.device() == acc.out.device() && part.lse.device() == acc.out.device(),
           "cp::merge_attention_rows: expected lse [B, NH, Tl] and [B, NH, m] in ",
           dtype_name(acc.out.dtype()), " beside out ", acc.out.describe(), " and ",
           part.out.describe(), ", got lse ", acc.lse.describe(), " and ", part.lse.describe());
  if (fused("cp_merge_rows", acc.out) && acc.lse.is_contiguous()) {
    call_kernel<MergeRowsKernel>("cp_merge_rows", acc.out.device(), acc.out, acc.lse, begin,
                                 part.out.contiguous(), part.lse.contiguous());
    return;
  }
  autograd::NoGradGuard no_grad;
  const AttentionPart rows{acc.out.slice(2, begin, begin + m), acc.lse.slice(2, begin, begin + m)};
  const AttentionPart merged = merge_attention(rows, {part.out.to(acc.out.dtype()), part.lse});
  rows.out.copy_(merged.out);
  rows.lse.copy_(merged.lse);
}

BlockPlan plan_block(Layout layout, bool causal, int rank, int src, int world, int64_t Tl) {
  TT_CHECK(world >= 1 && rank >= 0 && rank < world && src >= 0 && src < world && Tl >= 1 &&
               Tl % (num_chunks(layout, world) / world) == 0,
           "cp::plan_block: rank ", rank, " and src ", src, " must be in [0, ", world,
           ") and Tl = ", Tl, " a positive multiple of the chunks per rank (", layout_name(layout),
           ")");
  using Kind = BlockPlan::Kind;
  if (!causal) return {Kind::kFull, 0, Tl, 0, Tl};
  if (src == rank) return {Kind::kCausal, 0, Tl, 0, Tl};
  if (layout == Layout::kContiguous) {
    return src < rank ? BlockPlan{Kind::kFull, 0, Tl, 0, Tl} : BlockPlan{};
  }
  // Zigzag: this rank's chunks are r and 2N-1-r, the block's src and 2N-1-src.
  const int64_t c = Tl / 2;
  if (src < rank) return {Kind::kFull, 0, Tl, 0, c};  // both chunks see chunk src only
  return {Kind::kFull, c, Tl, 0, Tl};                 // only chunk 2N-1-r sees the block
}

int RingContext::prev() const {
  return (group->rank() + group->world_size() - 1) % group->world_size();
}

int RingContext::next() const {
  return (group->rank() + 1) % group->world_size();
}

namespace {

using dist::P2POp;

// Sends `send` to ctx.next() and receives as many tensors of the same shapes from ctx.prev()
// (tags first_tag, first_tag + 1, ...); returns the receive buffers and appends the transfers
// to `ops`.
std::vector<Tensor> pass_on(const RingContext& ctx, const std::vector<Tensor>& send, int first_tag,
                            std::vector<P2POp>& ops) {
  std::vector<Tensor> recv;
  for (std::size_t i = 0; i < send.size(); ++i) {
    const int tag = first_tag + static_cast<int>(i);
    recv.push_back(empty(send[i].shape(), {send[i].dtype(), send[i].device()}));
    ops.push_back({P2POp::Kind::kSend, send[i], ctx.next(), tag});
    ops.push_back({P2POp::Kind::kRecv, recv.back(), ctx.prev(), tag});
  }
  return recv;
}

/// Ring attention of this rank's shard; backward passes dK, dV around the ring.
struct RingAttentionFn : autograd::Function {
  explicit RingAttentionFn(RingContext ctx) : ctx_(ctx) {}
  std::string name() const override { return "RingAttentionBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    // Row-major strides (not just contiguous()): chapter 11's bf16 kernels read slices of q, k
    // and v as strided views, which need every stride a multiple of 16 bytes.
    const Tensor q = row_major(in[0]);
    AttentionPart acc;
    KVBlock kv{row_major(in[1]), row_major(in[2])};
    for (int step = 0; step < ctx_.group->world_size(); ++step) {
      kv = ring_forward_step(ctx_, step, q, kv, acc);
    }
    lse_ = acc.lse;
    // bfloat16: the parts were merged in float32; the result is rounded once.
    return {acc.out.to(q.dtype())};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>& out) override {
    save_for_backward({in[0].contiguous(), in[1].contiguous(), in[2].contiguous(), out[0]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    autograd::NoGradGuard no_grad;
    const std::vector<Tensor>& s = saved_tensors();
    const Tensor &q = s[0], &out = s[3];
    const Tensor dout = grads[0].contiguous();
    const int world = ctx_.group->world_size(), rank = ctx_.group->rank();
    // dQ, dK, dV accumulate (and dK, dV travel) in float32 for bfloat16 blocks.
    const TensorOptions acc{accumulation_dtype(q.dtype()), q.device()};
    // sum += g in rows [begin, begin + m): the first term of a sum that covers all its rows
    // (every step 0: the rank's own block) becomes the sum itself, widened, instead of zeros
    // and an add.
    auto accumulate = [&acc](Tensor& sum, const Shape& shape, int64_t begin, const Tensor& g) {
      if (!sum.defined()) {
        if (begin == 0 && g.shape() == shape) {
          sum = g.to(acc.dtype).contiguous();
          return;
        }
        sum = zeros(shape, acc);
      }
      add_rows(sum, begin, g);
    };
    Tensor dq;
    KVBlock kv{s[1], s[2]};
    Tensor dk, dv;  // the accumulated dK, dV of the block this rank holds (from earlier ranks)
    for (int step = 0; step < world; ++step) {
      // While this block's gradients are computed: the next K/V block comes from prev(), and
      // the dK, dV accumulated by the ranks before (for the block held now) arrive with it.
      std::vector<P2POp> ops;
      std::vector<Tensor> next_kv, arrived;
      if (step + 1 < world) next_kv = pass_on(ctx_, {kv.k, kv.v}, 0, ops);
      if (step > 0) arrived = pass_on(ctx_, {dk, dv}, 2, ops);
      const std::unique_ptr<dist::Work> transfer = ctx_.group->batch_send_recv_async(ops);

      const int src = (rank - step + world) % world;
      const BlockPlan plan = plan_block(ctx_.layout, ctx_.causal, rank, src, world, q.size(2));
      std::array<Tensor, 3> g;
      if (plan.kind != BlockPlan::Kind::kNone) {
        auto rows = [&](const Tensor& t) { return t.slice(2, plan.q_begin, plan.q_end); };
        auto keys = [&](const Tensor& t) { return t.slice(2, plan.k_begin, plan.k_end); };
        g = block_backward(rows(dout), rows(q), keys(kv.k), keys(kv.v), rows(out),
                           lse_.slice(2, plan.q_begin, plan.q_end),
                           plan.kind == BlockPlan::Kind::kCausal, kMaxBlockScores,
                           /*widen_bf16=*/false);
        accumulate(dq, q.shape(), plan.q_begin, g[0]);
      }
      transfer->wait();
      dk = step > 0 ? arrived[0] : Tensor();
      dv = step > 0 ? arrived[1] : Tensor();
      if (plan.kind != BlockPlan::Kind::kNone) {
        accumulate(dk, kv.k.shape(), plan.k_begin, g[1]);
        accumulate(dv, kv.v.shape(), plan.k_begin, g[2]);
      }
      if (!dk.defined()) dk = zeros(kv.k.shape(), acc);  // no query saw the block
      if (!dv.defined()) dv = zeros(kv.v.shape(), acc);
      if (step + 1 < world) kv = {next_kv[0], next_kv[1]};
    }
    if (!dq.defined()) dq = zeros(q.shape(), acc);  // no block had queries of this rank
    // The sums are final: rounded to q's dtype before the last hop (the values the owner would
    // get by rounding after it), so that a bf16 ring sends half the bytes home.
    dk = dk.to(q.dtype());
    dv = dv.to(q.dtype());
    if (world > 1) {  // the last hop: every block's dK, dV go home, while dQ is rounded
      std::vector<P2POp> ops;
      const std::vector<Tensor> home = pass_on(ctx_, {dk, dv}, 2, ops);
      const std::unique_ptr<dist::Work> hop = ctx_.group->batch_send_recv_async(ops);
      dq = dq.to(q.dtype());
      hop->wait();
      dk = home[0];
      dv = home[1];
    }
    return {dq.to(q.dtype()), dk, dv};
  }
  void release_saved() override {
    Function::release_saved();
    lse_ = Tensor();
  }

  RingContext ctx_;
  Tensor lse_;  // the final log-sum-exp of this rank's rows (no history: no reference cycle)
};

}  // namespace

Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, dist::ProcessGroup& group,
                      Layout layout, bool causal) {
  if (q.defined() && k.defined() && v.defined() && q.dtype() == DType::kBFloat16 &&
      k.dtype() == q.dtype() && v.dtype() == q.dtype() && !q.device().is_cuda()) {
    // bfloat16 on the CPU: MPI has no bfloat16 datatype, so in and out in bfloat16, float32
    // inside (the blocks, the merge and the transfers). On CUDA (NCCL) the ring runs in
    // bfloat16: chapter 11's kernels, K/V sent in bfloat16, merge and gradients in float32.
    const Tensor y = ring_attention(to_dtype(q, DType::kFloat32), to_dtype(k, DType::kFloat32),
                                    to_dtype(v, DType::kFloat32), group, layout, causal);
    return to_dtype(y, DType::kBFloat16);
  }
  check_block("cp::ring_attention", q, k, v);
  TT_CHECK(k.shape() == q.shape(), "cp::ring_attention: q, k and v must have one shape, got q ",
           q.describe(), ", k ", k.describe());
  // The blocks' CUDA kernels take a few head sizes: refused here, before any transfer starts.
  TT_CHECK(!q.device().is_cuda() || (q.dtype() == DType::kBFloat16
                                         ? flash_attention_bf16_supports(q.size(3))
                                         : flash_attention_supports(DeviceType::kCUDA, q.size(3))),
           "cp::ring_attention: the CUDA FlashAttention kernels of its blocks take hs 32, 64 or "
           "128, got q ",
           q.describe());
  const int64_t per_rank = num_chunks(layout, group.world_size()) / group.world_size();
  TT_CHECK(q.size(2) % per_rank == 0 && q.size(2) > 0, "cp::ring_attention: the ",
           layout_name(layout), " layout holds ", per_rank,
           " chunk(s) per rank, which must divide the shard length Tl of q ", q.describe());
  return autograd::Function::apply<RingAttentionFn>({q, k, v},
                                                    RingContext{&group, layout, causal})[0];
}

Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  if (causal) return causal_attention_naive(q, k, v);
  check_block("cp::attention_reference", q, k, v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return matmul(softmax(mul(matmul(q, transpose(k, 2, 3)), scale), -1), v);
}

}  // namespace tt::cp
