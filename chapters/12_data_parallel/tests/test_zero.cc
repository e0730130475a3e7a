// Exercise ch12.4: ZeRO-1 AdamW must train exactly like AdamW on the averaged gradient (the
// one-process run on the global batch, and DDP + AdamW), with 1/N of the optimizer state, on
// the CPU and on GPUs (one per rank, collectives through NCCL: suites *Cuda* skip without).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ch12_test_util.h"
#include "tt/backend.h"
#include "tt/cuda_probe.h"
#include "tt/ddp.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_reduce.h"
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

TEST(Ch12_4_ZeroMpi, StepBuffersAreAllocatedOnce) {
  ProcessGroup& g = world();
  auto model = ch12_test::make_model(1);
  ZeroAdamW zero(model->parameters(), kAdamW, g);
  ch12_test::forward_backward(*model, ch12_test::global_batch(0));  // gradients stay set
  const std::size_t before = CpuAllocator().stats().allocated;
  zero.step();
  const std::size_t after_one = CpuAllocator().stats().allocated;
  zero.step();
  // The flat N*S buffer and the S-element gradient shard, kept from the first step on.
  const int64_t N = g.world_size(), S = zero.shard_numel();
  EXPECT_EQ(static_cast<int64_t>(after_one - before), 4 * (N * S + S));
  EXPECT_EQ(CpuAllocator().stats().allocated, after_one) << "the second step allocated more";
  EXPECT_EQ(zero.state_bytes(), 8 * S) << "the buffers are not optimizer state";
}

/// ZeroAdamW on `device` with clipping between its halves, against chapter 05's AdamW +
/// clip_grad_norm_ on one copy of the model on the same device with the global batch, for
/// max_norm +inf (no clipping) and one that clips every step. With one rank and no clipping the
/// results must be equal bit for bit (the average over one rank is the identity, and AdamW is
/// elementwise: a shard's pieces get the bits of the whole tensors); otherwise the summation
/// orders differ (over rows, over ranks, and the norm shard by shard): 1e-5 abs + 1e-4 rel.
void expect_clipped_zero_equals_adamw(ProcessGroup& g, Device device) {
  const int64_t rows = ch12_test::kGlobalBatch / g.world_size();
  const auto on_device = [&](const ch12_test::Data& d) {
    return ch12_test::Data{d.x.to(device), d.y.to(device)};
  };
  for (const double max_norm : {std::numeric_limits<double>::infinity(), 0.5}) {
    SCOPED_TRACE("max_norm " + std::to_string(max_norm) + " on " + device.str());
    auto model = ch12_test::make_model(100 + static_cast<uint64_t>(g.rank()));
    model->to(device);
    ZeroAdamW zero(groups_of(model->parameters()), kAdamW, g);  // broadcasts rank 0's
    EXPECT_EQ(zero.device(), device);
    auto single = ch12_test::make_model(100);
    single->to(device);
    optim::AdamW adamw(groups_of(single->parameters()), kAdamW);
    for (int step = 0; step < kSteps; ++step) {
      const ch12_test::Data global = ch12_test::global_batch(step);
      zero.zero_grad();
      ch12_test::forward_backward(*model,
                                  on_device(ch12_test::rows(global, g.rank() * rows, rows)));
      zero.reduce_gradients();
      EXPECT_EQ(zero.grad_shard().device(), device);
      const double norm = zero.clip_grad_norm(max_norm);
      zero.update();

      adamw.zero_grad();
      ch12_test::forward_backward(*single, on_device(global));
      const double expected = optim::clip_grad_norm_(single->parameters(), max_norm);
      adamw.step();
      EXPECT_NEAR(norm, expected, 1e-6 * expected) << "step " << step;
      if (std::isfinite(max_norm)) {
        EXPECT_GT(expected, max_norm) << "step " << step << " clips";
      }
    }
    for (const Tensor& m : zero.shard_state()) EXPECT_EQ(m.device(), device);
    if (g.world_size() == 1 && !std::isfinite(max_norm)) {
      ch12_test::expect_params_near(model->parameters(), single->parameters(), 0, 0);
    } else {
      ch12_test::expect_params_near(model->parameters(), single->parameters(), 1e-5, 1e-4);
    }
    std::vector<Tensor> on_cpu;  // (the check compares host bytes)
    for (const Tensor& p : model->parameters()) on_cpu.push_back(p.detach().to(Device::cpu()));
    ch12_test::expect_identical_across_ranks(g, on_cpu);
  }
}

TEST(Ch12_4_ZeroMpi, ClippedEqualsAdamWOnTheGlobalBatch) {
  expect_clipped_zero_equals_adamw(world(), Device::cpu());
}

// The same on GPUs: parameters, moment shards and buffers on cuda:local_rank, the
// reduce-scatter and the all-gather through NCCL, chapter 07's kernels.
TEST(Ch12_4_ZeroCudaMpi, ClippedEqualsAdamWOnTheGlobalBatch) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  expect_clipped_zero_equals_adamw(g, Device::cuda(g.local_rank()));
}

// The full moments of a GPU run come back on its GPU and set the shards back (checkpoints).
TEST(Ch12_4_ZeroCudaMpi, GatheredStateRoundTripsOnTheGpu) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  const Device gpu = Device::cuda(g.local_rank());
  auto model = ch12_test::make_model(3);
  model->to(gpu);
  ZeroAdamW zero(model->parameters(), kAdamW, g);
  ch12_test::forward_backward(
      *model, {ch12_test::global_batch(0).x.to(gpu), ch12_test::global_batch(0).y.to(gpu)});
  zero.step();
  const std::vector<Tensor> full = zero.gather_state();
  ASSERT_EQ(full.size(), 2u);
  const std::vector<Tensor> mine = zero.shard_state();
  const int64_t begin = g.rank() * zero.shard_numel();
  const int64_t len = std::clamp<int64_t>(zero.total_numel() - begin, 0, zero.shard_numel());
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(full[k].device(), gpu);
    EXPECT_EQ(full[k].numel(), zero.total_numel());
    const Tensor shard = mine[k].to(Device::cpu());
    EXPECT_GT(sum(mul(shard, shard)).item(), 0.0) << "moment " << k << " after one step";
    if (len > 0) {
      EXPECT_TENSOR_NEAR(full[k].narrow(0, begin, len).to(Device::cpu()), shard.narrow(0, 0, len),
                         0, 0);
    }
    mine[k].fill_(0.0);
  }
  zero.set_state_from_full(full[0].to(Device::cpu()), full[1]);  // from the host, or the GPU
  for (std::size_t k = 0; k < 2 && len > 0; ++k) {
    EXPECT_TENSOR_NEAR(mine[k].narrow(0, 0, len).to(Device::cpu()),
                       full[k].narrow(0, begin, len).to(Device::cpu()), 0, 0)
        << "moment " << k;
  }
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

TEST(Ch12_ZeroShardsCuda, RejectsParametersOnTwoDevices) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  ProcessGroup g(make_self_backend());
  Tensor cpu = zeros({2}).set_requires_grad(true);
  Tensor gpu = zeros({3}, {.device = Device::cuda(0)}).set_requires_grad(true);
  EXPECT_TT_ERROR(ZeroAdamW({cpu, gpu}, kAdamW, g), "ZeroAdamW", "parameter 1", "cuda:0",
                  "parameter 0 is on cpu", "one device");
}

}  // namespace
}  // namespace tt::dist
