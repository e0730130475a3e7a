// The vocabulary split over a tensor-parallel group (tt/vocab_parallel.h): the shard
// arithmetic, the partial lookup, the vocab-parallel embedding and the fused vocab-parallel head.
// The cross-entropy (ch13.4) is in vocab_parallel_loss.cc.
#include "tt/vocab_parallel.h"

#include <algorithm>
#include <vector>

#include "tt/error.h"
#include "tt/fused_classifier.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_nn.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/tensor_parallel.h"

namespace tt::tp {

int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple) {
  TT_CHECK(vocab_size > 0 && multiple > 0, "padded_vocab_size(", vocab_size, ", ", multiple,
           "): both must be positive");
  return (vocab_size + multiple - 1) / multiple * multiple;
}

VocabShard vocab_shard(int64_t padded_vocab, int64_t vocab_size, int tp, int rank) {
  TT_CHECK(tp >= 1 && rank >= 0 && rank < tp, "vocab_shard: rank ", rank, " of tp=", tp);
  TT_CHECK(vocab_size > 0 && padded_vocab >= vocab_size, "vocab_shard: the padded vocabulary ",
           padded_vocab, " must hold the ", vocab_size, " tokens");
  TT_CHECK(padded_vocab % tp == 0, "vocab_shard: the tensor-parallel size ", tp,
           " does not divide the padded vocabulary of ", padded_vocab,
           " rows (pad it to a multiple of tp, e.g. ", padded_vocab_size(vocab_size, 64 * tp),
           " = ", vocab_size, " rounded up to a multiple of 64*tp)");
  VocabShard s;
  s.size = padded_vocab / tp;
  s.start = s.size * rank;
  s.valid = std::min(s.size, std::max<int64_t>(0, vocab_size - s.start));
  return s;
}

Tensor vocab_parallel_lookup(const Tensor& weight, const Tensor& idx, int64_t start) {
  TT_CHECK(weight.defined() && weight.dim() == 2 && idx.defined() && idx.dtype() == DType::kInt64,
           "vocab_parallel_lookup: expected a table [rows, C] and int64 ids, got ",
           weight.defined() ? weight.describe() : std::string("(undefined)"), " and ",
           idx.defined() ? idx.describe() : std::string("(undefined)"));
  // The ids are few (B*T): decide on the host which are this rank's, look up row id - start for
  // them and zero the others' rows with a 0/1 mask. The others look up row (id - start) mod rows:
  // any row would do (times 0), but one row for all of them (row 0, before) made the embedding
  // backward add thousands of zero rows into that one row: 7.1 ms instead of 1.6 on the rank
  // holding the rare tokens (GPT-2 774M, tp 2, H200).
  const int64_t rows = weight.size(0);
  const std::vector<int64_t> ids = idx.contiguous().to_vector<int64_t>();
  std::vector<int64_t> local(ids.size());
  std::vector<float> mine(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const int64_t r = ids[i] - start;
    const bool here = r >= 0 && r < rows;
    local[i] = here ? r : (r % rows + rows) % rows;
    mine[i] = here ? 1.0f : 0.0f;
  }
  const Tensor local_idx = from_vector(local, idx.shape()).to(idx.device());
  Shape mask_shape = idx.shape();
  mask_shape.push_back(1);
  const Tensor mask = from_vector(mine, mask_shape).to(weight.device()).to(weight.dtype());
  return mul(embedding(weight, local_idx), mask);
}

Tensor vocab_parallel_classifier_loss(const Tensor& x, const Tensor& wte, const Tensor& targets,
                                      const VocabShard& shard, int64_t vocab_size,
                                      dist::ProcessGroup& group) {
  TT_CHECK(wte.defined() && wte.dim() == 2 && wte.size(0) == shard.size,
           "vocab_parallel_classifier_loss (", group.where(),
           "): expected this rank's rows of the table [", shard.size, ", C], got ",
           wte.defined() ? wte.describe() : std::string("(undefined)"));
  FusedClassifierOptions options;
  options.part.first = shard.start;
  options.part.whole_vocab_size = vocab_size;
  // stats [2, R]: this rank's log-sum-exp (-inf with no valid column) and target logit (0 where
  // the target is another rank's). One all_gather; every rank then combines the same [tp, 2, R]
  // in the same order, so the loss is bitwise the same on every rank.
  options.part.combine = [&group](const Tensor& stats) {
    const int64_t R = stats.size(1);
    Tensor all = empty({group.world_size(), 2 * R}, {stats.dtype(), stats.device()});
    group.all_gather(all, stats.view({2 * R}));
    const Tensor lse = all.narrow(1, 0, R), zt = all.narrow(1, R, R);  // [tp, R] each
    const Tensor m = max(lse, 0);  // finite: some rank holds a valid column
    stats.select(0, 0).copy_(add(m, log(sum(exp(sub(lse, unsqueeze(m, 0))), {0}))));
    stats.select(0, 1).copy_(sum(zt, {0}));
  };
  return fused_classifier_loss(x, wte, shard.valid, targets, options);
}

VocabParallelEmbedding::VocabParallelEmbedding(const nn::Embedding& full,
                                               dist::ProcessGroup& group_, int64_t vocab_size)
    : Module("VocabParallelEmbedding"),
      num_embeddings(full.num_embeddings),
      dim(full.dim),
      group(&group_) {
  shard = vocab_shard(full.num_embeddings, vocab_size > 0 ? vocab_size : full.num_embeddings,
                      group_.world_size(), group_.rank());
  weight = register_parameter(
      "weight", full.weight.detach().narrow(0, shard.start, shard.size).contiguous().clone());
}

Tensor VocabParallelEmbedding::forward(const Tensor& idx) {
  return reduce_from_tp(vocab_parallel_lookup(weight, idx, shard.start), *group);
}

std::string VocabParallelEmbedding::extra_repr() const {
  return detail::str("num=", num_embeddings, " (rows ", shard.start, "..",
                     shard.start + shard.size - 1, " on this rank, ", shard.valid,
                     " valid), dim=", dim, ", tp=", group->world_size());
}

}  // namespace tt::tp
