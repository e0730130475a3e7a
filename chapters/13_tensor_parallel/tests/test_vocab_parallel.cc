// Exercise ch13.4 (the vocab-parallel cross-entropy) and the vocab-parallel embedding: the loss
// and every gradient against the unsplit cross_entropy / embedding, for every tp that divides
// the world, with vocabularies that tp does not divide (padded), down to a rank whose rows are
// all padding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ch13_test_util.h"
#include "tt/parallel.h"
#include "tt/vocab_parallel.h"

namespace {

using namespace ch13_test;  // the shared helpers (ch13_test_util.h)
using tt::Tensor;
namespace dist = tt::dist;

constexpr double kTol = 1e-5;

// `n` token ids in [0, vocab), the same on every rank.
Tensor make_targets(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> t(static_cast<std::size_t>(n));
  for (auto& v : t) v = static_cast<int64_t>(gen() % static_cast<uint64_t>(vocab));
  return tt::from_vector(t, {n});
}

// The unsplit loss of logits [N, Vp] over the first V columns, and its gradient (zeros in the
// padded columns), against the vocab-parallel one of this rank's columns.
void check_cross_entropy(int64_t rows, int64_t vocab, int64_t padded, uint64_t seed) {
  SCOPED_TRACE("V=" + std::to_string(vocab) + " Vp=" + std::to_string(padded));
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const tt::tp::VocabShard shard = tt::tp::vocab_shard(padded, vocab, tp, group.rank());
    // Large logits (scale 30): a loss without the max shift would overflow exp().
    const Tensor full = tt::mul(make_input(rows, padded, seed), 30.0);
    const Tensor targets = make_targets(rows, vocab, seed + 1);

    Tensor ref_logits = full.detach().clone().set_requires_grad();
    Tensor ref = tt::cross_entropy(tt::slice(ref_logits, 1, 0, vocab), targets);
    tt::autograd::backward(ref);

    Tensor mine = full.detach().narrow(1, shard.start, shard.size).contiguous().set_requires_grad();
    Tensor loss = tt::tp::vocab_parallel_cross_entropy(mine, targets, shard, vocab, group);
    ASSERT_EQ(loss.dim(), 0);
    EXPECT_NEAR(loss.item(), ref.item(), kTol * std::max(1.0, std::fabs(ref.item())));
    tt::autograd::backward(loss);
    ASSERT_TRUE(mine.grad().defined());
    const Tensor ref_grad = ref_logits.grad().narrow(1, shard.start, shard.size).contiguous();
    EXPECT_LE(max_abs_diff(mine.grad(), ref_grad), kTol)
        << "rank " << group.rank() << " columns " << shard.start << ".."
        << shard.start + shard.size - 1 << " (" << shard.valid << " valid)";
    // The padded columns get no gradient: they are not part of the softmax.
    if (shard.valid < shard.size) {
      const Tensor padded_grad = mine.grad().narrow(1, shard.valid, shard.size - shard.valid);
      EXPECT_EQ(tt::max(tt::mul(padded_grad, padded_grad)).item(), 0.0);
    }
  });
}

TEST(Ch13_4_VocabParallelCrossEntropy, MatchesCrossEntropyMpi) {
  check_cross_entropy(/*rows=*/6, /*vocab=*/16, /*padded=*/16, 21);
}

TEST(Ch13_4_VocabParallelCrossEntropy, PaddedVocabularyMatchesMpi) {
  // 13 is divisible by neither 2 nor 4: padded to 16, rank 3 of 4 holds 1 token and 3 pads.
  check_cross_entropy(7, 13, 16, 22);
  // V = 9 of Vp = 16: at tp = 4 rank 3's rows 12..15 are all padding (no valid column).
  check_cross_entropy(5, 9, 16, 23);
}

TEST(Ch13_4_VocabParallelCrossEntropy, ShardArithmetic) {
  const tt::tp::VocabShard s = tt::tp::vocab_shard(16, 9, 4, 2);
  EXPECT_EQ(s.start, 8);
  EXPECT_EQ(s.size, 4);
  EXPECT_EQ(s.valid, 1);
  EXPECT_EQ(tt::tp::vocab_shard(16, 9, 4, 3).valid, 0);
  EXPECT_EQ(tt::tp::padded_vocab_size(50257, 64), 50304);
  try {
    tt::tp::vocab_shard(50257, 50257, 2, 0);
    ADD_FAILURE() << "vocab_shard accepted 50257 rows over tp=2";
  } catch (const tt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide the padded vocabulary"),
              std::string::npos)
        << e.what();
  }
}

TEST(Ch13_4_VocabParallelCrossEntropy, RejectsBadTargetsMpi) {
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const tt::tp::VocabShard shard = tt::tp::vocab_shard(16, 13, tp, group.rank());
    const Tensor logits = make_input(3, shard.size, 24);
    // Id 14 is a padded row (>= V = 13): never a target. Every rank has the same targets, so
    // every rank throws before the first collective.
    const Tensor bad = tt::from_vector(std::vector<int64_t>{1, 14, 2}, {3});
    try {
      tt::tp::vocab_parallel_cross_entropy(logits, bad, shard, 13, group);
      ADD_FAILURE() << "a target in the padding was accepted";
    } catch (const tt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("target 14 of row 1"), std::string::npos) << e.what();
    }
    EXPECT_THROW(tt::tp::vocab_parallel_cross_entropy(make_input(3, shard.size + 1, 25),
                                                      make_targets(3, 13, 26), shard, 13, group),
                 tt::Error);
    dist::world().barrier();  // nobody was left waiting in a collective
  });
}

TEST(Ch13_VocabParallelEmbedding, MatchesEmbeddingMpi) {
  constexpr int64_t kPadded = 16, kVocab = 13, kDim = 4;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    tt::Generator gen(31);
    tt::nn::Embedding full(kPadded, kDim, gen);
    tt::tp::VocabParallelEmbedding emb(full, group, kVocab);
    ASSERT_EQ(emb.weight.shape(), (tt::Shape{kPadded / tp, kDim}));
    const Tensor idx = tt::from_vector(std::vector<int64_t>{0, 12, 5, 5, 7, 3}, {2, 3});
    const Tensor w = make_input(6, kDim, 32).view({2, 3, kDim});
    Tensor ref = full.forward(idx);
    tt::autograd::backward(tt::sum(tt::mul(ref, w)));
    Tensor y = emb.forward(idx);
    EXPECT_LE(max_abs_diff(y, ref), 0.0) << "one row of one rank plus zeros: exact";
    tt::autograd::backward(tt::sum(tt::mul(y, w)));
    ASSERT_TRUE(emb.weight.grad().defined());
    EXPECT_LE(max_abs_diff(emb.weight.grad(),
                           full.weight.grad().narrow(0, emb.shard.start, emb.shard.size)),
              kTol);
  });
}

// The fused vocab-parallel head against the fused classifier on the whole table in one process
// (ch13_test_util.h's check_fused_head): float32 at 1e-5, bfloat16 at 1e-5 on the loss and 1e-2
// on the gradients, with vocabularies as the cross-entropy test: 13 of 16 and 9 of 16 (a rank of
// only padding).
TEST(Ch13_VocabParallelClassifier, MatchesTheFusedClassifierMpi) {
  tt::ScopedNumThreads one_thread(1);
  for (const tt::DType dtype : {tt::DType::kFloat32, tt::DType::kBFloat16}) {
    const double grad_tol = dtype == tt::DType::kBFloat16 ? 1e-2 : kTol;
    check_fused_head(13, 16, dtype, 41, tt::Device::cpu(), kTol, grad_tol);
    check_fused_head(9, 16, dtype, 44, tt::Device::cpu(), kTol, grad_tol);
  }
}

}  // namespace
