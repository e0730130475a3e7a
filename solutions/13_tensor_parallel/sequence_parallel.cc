// Sequence parallelism's gather and scatter (tt/sequence_parallel.h): the collectives along the
// sequence dim (given) and the two conjugate autograd operators built on them (exercise ch13.5).
#include <numeric>
#include <utility>
#include <vector>

#include "tt/autograd.h"
#include "tt/error.h"
#include "tt/ops_view.h"
#include "tt/sequence_parallel.h"
#include "tt/todo.h"

namespace tt::tp {

namespace {

// {1, 0, 2, 3, ..., n-1}: swaps the first two of n dims.
std::vector<int64_t> swap_first_two(int64_t n) {
  std::vector<int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[0], p[1]);
  return p;
}

void check_sequence(const char* op, const Tensor& x, dist::ProcessGroup& group, bool divisible) {
  TT_CHECK(x.defined() && x.dim() >= 2, op, " (", group.where(),
           "): needs [B, T, ...] (the sequence is dim 1), got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
  TT_CHECK(!divisible || x.size(1) % group.world_size() == 0, op, " (", group.where(),
           "): the sequence length ", x.size(1), " of ", x.describe(),
           " is not divisible by the tensor-parallel size ", group.world_size(),
           " (sequence parallelism gives every rank T/tp tokens)");
}

}  // namespace

Tensor sequence_all_gather(const Tensor& x, dist::ProcessGroup& group) {
  check_sequence("gather_from_sequence", x, group, false);
  const Tensor mine = x.contiguous();
  const int64_t tp = group.world_size();
  // The collective concatenates whole buffers: [tp, B, S, ...]; rank r's tokens go to positions
  // [r*S, (r+1)*S) of every sequence, so the rank dim moves next to S: [B, tp, S, ...].
  Shape gathered = mine.shape();
  gathered.insert(gathered.begin(), tp);
  Tensor buffer = empty(gathered, {mine.dtype(), mine.device()});
  group.all_gather(buffer, mine);
  Shape out = mine.shape();
  out[1] *= tp;
  return buffer.permute(swap_first_two(buffer.dim())).contiguous().view(out);
}

Tensor sequence_reduce_scatter(const Tensor& x, dist::ProcessGroup& group) {
  check_sequence("reduce_scatter_to_sequence", x, group, true);
  const int64_t tp = group.world_size();
  // [B, T, ...] -> [B, tp, T/tp, ...] -> [tp, B, T/tp, ...]: rank r's tokens of every sequence
  // become the r-th contiguous block, which is what the collective hands to rank r.
  Shape split = x.shape();
  split[1] /= tp;
  Shape out = split;
  split.insert(split.begin() + 1, tp);
  const Tensor blocks =
      x.contiguous().view(split).permute(swap_first_two(static_cast<int64_t>(split.size())));
  Tensor y = empty(out, {x.dtype(), x.device()});
  group.reduce_scatter(y, blocks.contiguous());
  return y;
}

namespace {

// All-gather forward, reduce-scatter backward.
class GatherFromSequenceFn final : public autograd::Function {
 public:
  explicit GatherFromSequenceFn(dist::ProcessGroup& group) : group_(group) {}
  std::string name() const override { return "GatherFromSequenceBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
#if TT_SOLUTION
    return {sequence_all_gather(in[0], group_)};
#else
    TT_TODO("ch13.5",
            "gather_from_sequence forward: every rank's tokens [B, T/tp, ...] concatenated "
            "along the sequence in rank order, [B, T, ...]");
#endif
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
#if TT_SOLUTION
    // The gathered tensor feeds a column-parallel layer: each rank's gradient is a partial term
    // of the whole gradient, so the ranks' gradients are summed, and each keeps its tokens.
    return {sequence_reduce_scatter(g[0], group_)};
#else
    TT_TODO("ch13.5",
            "gather_from_sequence backward: this rank's tokens of the sum over the group of the "
            "output gradient");
#endif
  }

 private:
  dist::ProcessGroup& group_;
};

// Reduce-scatter forward, all-gather backward.
class ReduceScatterToSequenceFn final : public autograd::Function {
 public:
  explicit ReduceScatterToSequenceFn(dist::ProcessGroup& group) : group_(group) {}
  std::string name() const override { return "ReduceScatterToSequenceBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
#if TT_SOLUTION
    return {sequence_reduce_scatter(in[0], group_)};
#else
    TT_TODO("ch13.5",
            "reduce_scatter_to_sequence forward: this rank's tokens [B, T/tp, ...] of the sum "
            "over the group of the input [B, T, ...]");
#endif
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
#if TT_SOLUTION
    // Every rank's partial input contributed to every rank's tokens: its gradient is the whole
    // output gradient, every rank's tokens gathered.
    return {sequence_all_gather(g[0], group_)};
#else
    TT_TODO("ch13.5",
            "reduce_scatter_to_sequence backward: the output gradients of every rank "
            "concatenated along the sequence, [B, T, ...]");
#endif
  }

 private:
  dist::ProcessGroup& group_;
};

}  // namespace

Tensor gather_from_sequence(const Tensor& x, dist::ProcessGroup& group) {
  return autograd::Function::apply<GatherFromSequenceFn>({x}, group)[0];
}

Tensor reduce_scatter_to_sequence(const Tensor& x, dist::ProcessGroup& group) {
  return autograd::Function::apply<ReduceScatterToSequenceFn>({x}, group)[0];
}

}  // namespace tt::tp
