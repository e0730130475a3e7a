// Exercise ch12.4: ZeRO-1 AdamW must train exactly like AdamW on the averaged gradient (the
// one-process run on the global batch, and DDP + AdamW), with 1/N of the optimizer state.
#include <gtest/gtest.h>

#include "ch12_test_util.h"
#include "tt/backend.h"
#include "tt/ddp.h"
#include "tt/optim.h"
#include "tt/zero.h"

namespace tt::dist {
namespace {

constexpr int kSteps = 4;
const optim::AdamWOptions kAdamW{.lr = 1e-2, .weight_decay = 0.1};

/// GPT-2's grouping: matrices decay, vectors (biases) do not.
std::vector<optim::ParamGroup> groups_of(const std::vector<Tensor>& params) {
  optim::ParamGroup decay{{}, kAdamW.weight_decay}, no_decay{{}, 0.0};
  for (const Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  return {decay, no_decay};
}

/// Trains with `opt` (step/zero_grad), the ranks' rows of each global batch, after `sync`.
template <typename Opt, typename Sync>
void train(nn::Module& model, Opt& opt, const ProcessGroup& g, Sync&& sync) {
  const int64_t rows = ch12_test::kGlobalBatch / g.world_size();
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    ch12_test::forward_backward(
        model, ch12_test::rows(ch12_test::global_batch(step), g.rank() * rows, rows));
    sync();
    opt.step();
  }
}

TEST(Ch12_4_ZeroMpi, EqualsAdamWOnTheGlobalBatchAndDdp) {
  ProcessGroup& g = world();
  auto model = ch12_test::make_model(100 + static_cast<uint64_t>(g.rank()));  // broadcast fixes
  ZeroAdamW zero(groups_of(model->parameters()), kAdamW, g);
  const int64_t N = g.world_size(), before_zero = g.ring_bytes();
  train(*model, zero, g, [] {});
  EXPECT_EQ(zero.step_count(), kSteps);
  // Per step a reduce_scatter and an all_gather of the padded N*S floats, (N-1)/N each.
  const int64_t zero_bytes = g.ring_bytes() - before_zero;
  EXPECT_EQ(zero_bytes, kSteps * 2 * 4 * zero.shard_numel() * (N - 1));

  // One process, global batch, chapter 05's AdamW.
  ProcessGroup self(make_self_backend());
  auto single = ch12_test::make_model(100);
  optim::AdamW adamw(groups_of(single->parameters()), kAdamW);
  train(*single, adamw, self, [] {});
  // Adam's update m/sqrt(v) is sign-sensitive where a gradient is ~0: a slightly looser
  // tolerance than DDP + SGD for the other summation order of the whole batch.
  ch12_test::expect_params_near(model->parameters(), single->parameters(), 1e-5, 1e-4);

  // DDP + AdamW on the same ranks: same averaged gradients, same AdamW math.
  DistributedDataParallel ddp(ch12_test::make_model(100), g);
  optim::AdamW ddp_adamw(groups_of(ddp.module().parameters()), kAdamW);
  const int64_t before_ddp = g.ring_bytes();
  train(ddp.module(), ddp_adamw, g, [&] { ddp.sync_gradients(); });
  // One bucket: an all_reduce of P floats per step, 2(N-1)/N. ZeRO-1 sends the same bytes
  // (up to its padding to N*S elements).
  const int64_t P = ddp.module().num_parameters();
  EXPECT_EQ(g.ring_bytes() - before_ddp, kSteps * (2 * 4 * P * (N - 1) / N));
  EXPECT_LE(zero_bytes - (g.ring_bytes() - before_ddp), kSteps * 2 * 4 * (N - 1));
  ch12_test::expect_params_near(model->parameters(), ddp.module().parameters(), 1e-6, 1e-5);
  ch12_test::expect_identical_across_ranks(g, model->parameters());
}

TEST(Ch12_4_ZeroMpi, StateIsOneShardPerRank) {
  ProcessGroup& g = world();
  auto model = ch12_test::make_model(1);
  const int64_t P = model->num_parameters(), N = g.world_size();
  const std::size_t before = CpuAllocator().stats().allocated;
  ZeroAdamW zero(model->parameters(), kAdamW, g);
  const auto measured = static_cast<int64_t>(CpuAllocator().stats().allocated - before);
  EXPECT_EQ(zero.total_numel(), P);
  EXPECT_EQ(zero.shard_numel(), (P + N - 1) / N);
  EXPECT_EQ(zero.state_bytes(), 2 * 4 * ((P + N - 1) / N));
  EXPECT_EQ(measured, zero.state_bytes()) << "bytes the constructor kept allocated";
  // The shards tile [0, N*S): this rank's segments start at rank*S.
  int64_t covered = 0;
  for (const ShardSegment& s : zero.segments()) {
    EXPECT_EQ(s.shard_offset, covered);
    covered += s.numel;
  }
  EXPECT_EQ(covered,
            std::min(zero.shard_numel(), std::max<int64_t>(0, P - g.rank() * zero.shard_numel())));
}

TEST(Ch12_ZeroShards, SegmentsCutParametersAtShardEdges) {
  // Parameters of 3, 5 and 2 elements: [0,3) [3,8) [8,10); the range [2, 9).
  const auto segs = shard_segments({3, 5, 2}, 2, 9);
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ((std::vector<int64_t>{segs[0].param, segs[0].param_offset, segs[0].shard_offset,
                                  segs[0].numel}),
            (std::vector<int64_t>{0, 2, 0, 1}));
  EXPECT_EQ((std::vector<int64_t>{segs[1].param, segs[1].param_offset, segs[1].shard_offset,
                                  segs[1].numel}),
            (std::vector<int64_t>{1, 0, 1, 5}));
  EXPECT_EQ((std::vector<int64_t>{segs[2].param, segs[2].param_offset, segs[2].shard_offset,
                                  segs[2].numel}),
            (std::vector<int64_t>{2, 0, 6, 1}));
  EXPECT_TRUE(shard_segments({3, 5, 2}, 10, 12).empty());  // padding only
  EXPECT_TT_ERROR(shard_segments({3}, 2, 1), "shard_segments", "[2, 1)");
}

TEST(Ch12_ZeroShards, RejectsBadParameters) {
  ProcessGroup g(make_self_backend());
  Tensor p = zeros({2}, {.dtype = DType::kFloat64}).set_requires_grad(true);
  EXPECT_TT_ERROR(ZeroAdamW({p}, kAdamW, g), "ZeroAdamW", "float32", "float64");
  Tensor q = zeros({2}).set_requires_grad(true);
  EXPECT_TT_ERROR(ZeroAdamW({q, q}, kAdamW, g), "ZeroAdamW", "twice");
  EXPECT_TT_ERROR(ZeroAdamW({q}, {.beta1 = 1.0}, g), "ZeroAdamW", "betas");
}

}  // namespace
}  // namespace tt::dist
