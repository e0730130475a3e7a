// ============================================================================================
// YOUR EXERCISE FILE for chapter 13_tensor_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch13
// Generated from solutions/13_tensor_parallel/sequence_parallel.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Sequence parallelism's gather and scatter (tt/sequence_parallel.h): the collectives along a
// token dim, the sequence or whole sequences (given), and the two conjugate autograd operators
// built on them (exercise ch13.5).
#include <vector>

#include "tt/autograd.h"
#include "tt/error.h"
#include "tt/ops_view.h"
#include "tt/sequence_parallel.h"
#include "tt/todo.h"

namespace tt::tp {

namespace {

// The permutation of n dims that moves dim `from` to position `to`, the others in their order.
std::vector<int64_t> move_dim(int64_t n, int64_t from, int64_t to) {
  std::vector<int64_t> p;
  for (int64_t d = 0; d < n; ++d) {
    if (d != from) p.push_back(d);
  }
  p.insert(p.begin() + to, from);
  return p;
}

void check_sequence(const char* op, const Tensor& x, dist::ProcessGroup& group, int64_t dim,
                    bool divisible) {
  TT_CHECK(x.defined() && (dim == 0 || dim == 1) && x.dim() >= 2, op, " (", group.where(),
           "): needs [B, T, ...] and the token dim 0 (whole sequences) or 1 (the sequence), got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"), " and dim ", dim);
  TT_CHECK(!divisible || x.size(dim) % group.world_size() == 0, op, " (", group.where(),
           "): ", dim == 1 ? "the sequence length " : "the batch ", x.size(dim), " of ",
           x.describe(), " is not divisible by the tensor-parallel size ", group.world_size(),
           dim == 1 ? " (sequence parallelism gives every rank T/tp tokens)"
                    : " (sharding whole sequences gives every rank B/tp of them)");
}

}  // namespace

Tensor sequence_all_gather(const Tensor& x, dist::ProcessGroup& group, int64_t dim) {
  check_sequence("gather_from_sequence", x, group, dim, false);
  const Tensor mine = x.contiguous();
  const int64_t tp = group.world_size();
  // The collective concatenates whole buffers: [tp, B, S, ...]; rank r's tokens go to positions
  // [r*S, (r+1)*S) of every sequence, so the rank dim moves next to S: [B, tp, S, ...]. Along
  // dim 0 (whole sequences) the buffer already is [tp * B/tp, T, ...]: no copy.
  Shape gathered = mine.shape();
  gathered.insert(gathered.begin(), tp);
  Tensor buffer = empty(gathered, {mine.dtype(), mine.device()});
  group.all_gather(buffer, mine);
  Shape out = mine.shape();
  out[static_cast<std::size_t>(dim)] *= tp;
  return buffer.permute(move_dim(buffer.dim(), 0, dim)).contiguous().view(out);
}

Tensor sequence_reduce_scatter(const Tensor& x, dist::ProcessGroup& group, int64_t dim) {
  check_sequence("reduce_scatter_to_sequence", x, group, dim, true);
  const int64_t tp = group.world_size();
  // [B, T, ...] -> [B, tp, T/tp, ...] -> [tp, B, T/tp, ...]: rank r's tokens of every sequence
  // become the r-th contiguous block, which is what the collective hands to rank r. Along dim 0
  // the blocks are [tp, B/tp, T, ...] as they lie: no copy.
  Shape split = x.shape();
  split[static_cast<std::size_t>(dim)] /= tp;
  Shape out = split;
  split.insert(split.begin() + dim, tp);
  const Tensor blocks =
      x.contiguous().view(split).permute(move_dim(static_cast<int64_t>(split.size()), dim, 0));
  Tensor y = empty(out, {x.dtype(), x.device()});
  group.reduce_scatter(y, blocks.contiguous());
  return y;
}

namespace {

// All-gather forward, reduce-scatter backward.
class GatherFromSequenceFn final : public autograd::Function {
 public:
  GatherFromSequenceFn(dist::ProcessGroup& group, int64_t dim) : group_(group), dim_(dim) {}
  std::string name() const override { return "GatherFromSequenceBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    TT_TODO("ch13.5",
            "gather_from_sequence forward: every rank's tokens [B, T/tp, ...] concatenated "
            "along the token dim dim_ in rank order, [B, T, ...] (the given "
            "sequence_all_gather does the collective)");
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    TT_TODO("ch13.5",
            "gather_from_sequence backward: this rank's tokens of the sum over the group of the "
            "output gradient");
  }

 private:
  dist::ProcessGroup& group_;
  int64_t dim_;  // the token dim: 1 (the sequence) or 0 (whole sequences)
};

// Reduce-scatter forward, all-gather backward.
class ReduceScatterToSequenceFn final : public autograd::Function {
 public:
  ReduceScatterToSequenceFn(dist::ProcessGroup& group, int64_t dim) : group_(group), dim_(dim) {}
  std::string name() const override { return "ReduceScatterToSequenceBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    TT_TODO("ch13.5",
            "reduce_scatter_to_sequence forward: this rank's tokens [B, T/tp, ...] of the sum "
            "over the group of the input [B, T, ...]");
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    TT_TODO("ch13.5",
            "reduce_scatter_to_sequence backward: the output gradients of every rank "
            "concatenated along the token dim dim_, [B, T, ...]");
  }

 private:
  dist::ProcessGroup& group_;
  int64_t dim_;  // the token dim: 1 (the sequence) or 0 (whole sequences)
};

}  // namespace

Tensor gather_from_sequence(const Tensor& x, dist::ProcessGroup& group, int64_t dim) {
  return autograd::Function::apply<GatherFromSequenceFn>({x}, group, dim)[0];
}

Tensor reduce_scatter_to_sequence(const Tensor& x, dist::ProcessGroup& group, int64_t dim) {
  return autograd::Function::apply<ReduceScatterToSequenceFn>({x}, group, dim)[0];
}

}  // namespace tt::tp
