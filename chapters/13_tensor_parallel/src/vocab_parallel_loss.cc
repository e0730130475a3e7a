// ============================================================================================
// YOUR EXERCISE FILE for chapter 13_tensor_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch13
// Generated from solutions/13_tensor_parallel/vocab_parallel_loss.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// The vocab-parallel cross-entropy (tt/vocab_parallel.h): exercise ch13.4. Each rank holds the
// logits of its part of the vocabulary; three numbers per row cross the group (the max, the sum
// of exponentials, the target logit), never the logits.
#include <cmath>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/error.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_nn.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/todo.h"
#include "tt/vocab_parallel.h"

namespace tt::tp {

namespace {

// Where each row's target is among this rank's valid logits.
struct LocalTargets {
  Tensor flat_index;  // int64 [N]: row * valid + (target - start) where the target is here, else 0
  Tensor here;        // [N], the logits' dtype: 1 where the target is this rank's, else 0
};

// The targets are few (N = B*T int64): sorted out on the host, checked against the vocabulary.
LocalTargets local_targets(const Tensor& targets, const VocabShard& shard, int64_t vocab_size,
                           const Tensor& logits, const std::string& where) {
  const std::vector<int64_t> t = targets.contiguous().to_vector<int64_t>();
  std::vector<int64_t> index(t.size());
  std::vector<float> here(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    TT_CHECK(t[i] >= 0 && t[i] < vocab_size, "vocab_parallel_cross_entropy (", where, "): target ",
             t[i], " of row ", i, " is not a token id in [0, ", vocab_size, ")");
    const int64_t local = t[i] - shard.start;
    const bool mine = local >= 0 && local < shard.valid;
    index[i] = mine ? static_cast<int64_t>(i) * shard.valid + local : 0;
    here[i] = mine ? 1.0f : 0.0f;
  }
  const auto n = static_cast<int64_t>(t.size());
  return {from_vector(index, {n}).to(logits.device()),
          from_vector(here, {n}).to(logits.device()).to(logits.dtype())};
}

// The max over the group of each row's local max ([N] -> [N]). The process group reduces by sum
// and avg only, so every rank's maxima are gathered ([tp, N], tp*N numbers: nothing next to the
// logits) and the max is taken here.
[[maybe_unused]] Tensor group_row_max(const Tensor& local_max, dist::ProcessGroup& group) {
  const Tensor mine = local_max.contiguous();
  Tensor all = empty({group.world_size(), mine.numel()}, {mine.dtype(), mine.device()});
  group.all_gather(all, mine);
  return max(all, 0);
}

// Rows of the one-hot target matrix of this rank's valid columns, scaled: [N, valid] with
// `value[i]` at (i, target_i - start) where the target is this rank's (a scatter-add through
// chapter 04's embedding backward kernel), zeros elsewhere.
[[maybe_unused]] Tensor scatter_targets(const LocalTargets& t, const Tensor& value, int64_t rows,
                                        int64_t valid) {
  Tensor out = zeros({rows * valid, 1}, {value.dtype(), value.device()});
  call_kernel<EmbeddingBackwardKernel>("embedding_backward", value.device(), out,
                                       value.contiguous().view({rows, 1}), t.flat_index);
  return out.view({rows, valid});
}

class VocabParallelCrossEntropyFn final : public autograd::Function {
 public:
  VocabParallelCrossEntropyFn(const VocabShard& shard, int64_t vocab_size,
                              dist::ProcessGroup& group)
      : shard_(shard), vocab_size_(vocab_size), group_(group) {}
  std::string name() const override { return "VocabParallelCrossEntropyBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& logits = in[0];
    rows_ = logits.size(0);
    targets_ = local_targets(in[1], shard_, vocab_size_, logits, group_.where());
    TT_TODO("ch13.4",
            "vocab-parallel cross-entropy forward: the mean over rows of log(sum over the whole "
            "vocabulary of exp(logit)) - target logit, from this rank's valid columns only "
            "(padded ones excluded), with the row max, the sum of exponentials and the target "
            "logit reduced over the group; the same 0-d loss on every rank");
  }

  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0]});
  }

  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor& logits = saved_tensors()[0];
    (void)logits;
    TT_TODO("ch13.4",
            "vocab-parallel cross-entropy backward: this rank's columns of (softmax over the "
            "whole vocabulary - one_hot(target)) * dloss / N, zeros in the padded columns; no "
            "communication");
  }

 private:
  VocabShard shard_;
  int64_t vocab_size_;
  dist::ProcessGroup& group_;
  int64_t rows_ = 0;
  LocalTargets targets_;
  Tensor row_max_;  // [N], the max over the whole vocabulary
  Tensor sum_exp_;  // [N], sum over the whole vocabulary of exp(logit - max)
};

}  // namespace

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                    const VocabShard& shard, int64_t vocab_size,
                                    dist::ProcessGroup& group) {
  TT_CHECK(logits.defined() && logits.dim() == 2 && logits.size(1) == shard.size &&
               is_floating(logits.dtype()),
           "vocab_parallel_cross_entropy (", group.where(), "): expected float logits [N, ",
           shard.size, "] (this rank's columns), got ",
           logits.defined() ? logits.describe() : std::string("(undefined)"));
  TT_CHECK(targets.defined() && targets.dtype() == DType::kInt64 && targets.dim() == 1 &&
               targets.size(0) == logits.size(0),
           "vocab_parallel_cross_entropy (", group.where(), "): expected int64 targets [",
           logits.size(0), "], got ",
           targets.defined() ? targets.describe() : std::string("(undefined)"));
  return autograd::Function::apply<VocabParallelCrossEntropyFn>({logits, targets}, shard,
                                                                vocab_size, group)[0];
}

}  // namespace tt::tp
