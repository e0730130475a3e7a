// Partition by measured cost (measure_gpt2_costs): the costs are positive and in
// gpt2_block_costs' format, the head outweighs a block for a large vocabulary, the cut of the
// measured costs is partition_by_cost's, every rank gets the same costs and cut, and misuse
// (no repeats, a device that does not exist, a bad partition name) is refused clearly. No
// timing threshold is asserted: only orders that hold by a wide margin (a head 70 blocks wide
// against one block). Not the cut's shape: at C = 16 the per-operation overheads make the
// embedding as slow as a few blocks, so whether the last of 2 stages holds fewer blocks than the
// first depended on the timing (3 and 3 under ASan with two tests running at once).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/gpt2.h"
#include "tt/parallel.h"
#include "tt/pipeline.h"

namespace {

namespace dist = tt::dist;
using tt::gpt2::GPT2Config;

// C = 16 and V = 16384: the head's matmuls (6 C V FLOPs per token) weigh about 70 blocks (6 x
// 12 C^2 + 12 C T FLOPs), far beyond what timing noise or per-operation overheads move.
GPT2Config wide_vocabulary() {
  GPT2Config c = tt::test09::tiny_config();
  c.n_layer = 6;
  c.vocab_size = 16384;
  c.padded_vocab_size = 16384;
  return c;
}

constexpr int64_t kRows = 2, kT = 16;

TEST(Ch14_MeasuredPartition, CostsArePositiveAndTheHeadOutweighsABlock) {
  const tt::ScopedNumThreads one(1);
  const GPT2Config c = wide_vocabulary();
  const tt::pp::Gpt2MeasuredCosts m = tt::pp::measure_gpt2_costs(
      dist::world(), c, tt::Device::cpu(), tt::gpt2::reference_model_ops(), kRows, kT, 3);
  EXPECT_GT(m.embedding_ms, 0);
  EXPECT_GT(m.block_ms, 0);
  EXPECT_GT(m.last_block_ms, m.block_ms);
  EXPECT_GT(m.head_ms(), m.block_ms) << "a head 70 blocks wide measured as less than one block";
  // gpt2_block_costs' format: the embedding on the first block, the head on the last.
  const std::vector<double> costs = m.block_costs(c.n_layer);
  ASSERT_EQ(costs.size(), static_cast<std::size_t>(c.n_layer));
  EXPECT_DOUBLE_EQ(costs.front(), m.embedding_ms + m.block_ms);
  for (std::size_t i = 1; i + 1 < costs.size(); ++i) EXPECT_DOUBLE_EQ(costs[i], m.block_ms);
  EXPECT_DOUBLE_EQ(costs.back(), m.last_block_ms);
  for (double x : costs) EXPECT_GT(x, 0);
  EXPECT_EQ(m.block_costs(1), (std::vector<double>{m.embedding_ms + m.last_block_ms}));
  EXPECT_THROW((void)m.block_costs(0), tt::Error);
}

TEST(Ch14_MeasuredPartition, TheCutIsPartitionByCostOfTheMeasuredCosts) {
  const tt::ScopedNumThreads one(1);
  const GPT2Config c = wide_vocabulary();
  const std::vector<double> costs =
      tt::pp::gpt2_partition_costs(tt::pp::PartitionKind::kMeasured, dist::world(), c,
                                   tt::Device::cpu(), tt::gpt2::reference_model_ops(), kRows, kT);
  ASSERT_EQ(costs.size(), static_cast<std::size_t>(c.n_layer));
  for (int parts : {1, 2, 3}) {
    const std::vector<int> b = tt::pp::partition_by_cost(costs, parts);
    const std::vector<tt::pp::StageLayers> layers = tt::pp::gpt2_stage_layers(c, parts, costs);
    ASSERT_EQ(layers.size(), static_cast<std::size_t>(parts));
    for (int s = 0; s < parts; ++s) {
      EXPECT_EQ(layers[s].begin, b[s]) << parts << " stages, stage " << s;
      EXPECT_EQ(layers[s].end, b[s + 1]) << parts << " stages, stage " << s;
    }
    // The plan line names the kind, the cut and the predicted max stage against the mean.
    const std::string plan =
        tt::pp::describe_partition(tt::pp::PartitionKind::kMeasured, costs, layers);
    for (const char* part : {"partition measured: costs (ms) per block:", "stage 0 = embedding",
                             "+ head", "predicted max stage", "vs mean"}) {
      EXPECT_NE(plan.find(part), std::string::npos) << "no '" << part << "' in " << plan;
    }
  }
  // The other kinds: the FLOP model at seq_len and one per block.
  EXPECT_EQ(tt::pp::gpt2_partition_costs(tt::pp::PartitionKind::kFlops, dist::world(), c,
                                         tt::Device::cpu(), {}, kRows, kT),
            tt::pp::gpt2_block_costs(c, kT));
  EXPECT_EQ(tt::pp::gpt2_partition_costs(tt::pp::PartitionKind::kUniform, dist::world(), c,
                                         tt::Device::cpu(), {}, kRows, kT),
            std::vector<double>(6, 1.0));
}

TEST(Ch14_MeasuredPartition, EveryRankGetsTheSameCostsAndCutMpi) {
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  const GPT2Config c = wide_vocabulary();
  // Each rank times its own copy; the agreed costs (the median over the ranks) are identical.
  const std::vector<double> costs = tt::pp::measure_gpt2_block_costs(
      world, c, tt::Device::cpu(), tt::gpt2::reference_model_ops(), kRows, kT, 2);
  const int n = world.world_size();
  const auto size = static_cast<int64_t>(costs.size());
  const tt::Tensor all = tt::empty({n * size}, {.dtype = tt::DType::kFloat64});
  world.all_gather(all, tt::from_vector(costs, {size}));
  const std::vector<double> gathered = all.to_vector<double>();
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < size; ++i) {
      EXPECT_EQ(gathered[static_cast<std::size_t>(r * size + i)],
                costs[static_cast<std::size_t>(i)])
          << "rank " << r << " block " << i << " (seen from rank " << world.rank() << ")";
    }
  }
  // Hence the same cut everywhere (partition_by_cost is deterministic).
  std::vector<int64_t> cut;
  for (const auto& l : tt::pp::gpt2_stage_layers(c, 3, costs)) cut.push_back(l.begin);
  const tt::Tensor mine = tt::from_vector(cut, {3});
  const tt::Tensor first = mine.clone();
  world.broadcast(first, 0);
  EXPECT_EQ(first.to_vector<int64_t>(), cut) << "rank " << world.rank() << " cut differently";
  world.barrier();
}

TEST(Ch14_MeasuredPartition, MisuseIsRefusedClearly) {
  const GPT2Config c = wide_vocabulary();
  const auto message = [&](tt::Device device, int64_t rows, int64_t T, int repeats) {
    try {
      (void)tt::pp::measure_gpt2_costs(dist::world(), c, device, tt::gpt2::reference_model_ops(),
                                       rows, T, repeats);
    } catch (const tt::Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string repeats = message(tt::Device::cpu(), kRows, kT, 0);
  EXPECT_NE(repeats.find("measure_gpt2_costs"), std::string::npos) << repeats;
  EXPECT_NE(repeats.find("at least one timed repeat, got 0"), std::string::npos) << repeats;
  const std::string device = message(tt::Device::cuda(63), kRows, kT, 1);
  EXPECT_NE(device.find("cuda:63"), std::string::npos) << device;
  EXPECT_NE(device.find("no such device"), std::string::npos) << device;
  const std::string rows = message(tt::Device::cpu(), 0, kT, 1);
  EXPECT_NE(rows.find("rows >= 1"), std::string::npos) << rows;
  const std::string T = message(tt::Device::cpu(), kRows, c.block_size + 1, 1);
  EXPECT_NE(T.find("seq_len <= block_size"), std::string::npos) << T;
  try {
    (void)tt::pp::parse_partition_kind("timed");
    ADD_FAILURE() << "an unknown partition was accepted";
  } catch (const tt::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown partition 'timed'"), std::string::npos) << m;
  }
  for (const auto kind : {tt::pp::PartitionKind::kFlops, tt::pp::PartitionKind::kMeasured,
                          tt::pp::PartitionKind::kUniform}) {
    EXPECT_EQ(tt::pp::parse_partition_kind(tt::pp::partition_kind_name(kind)), kind);
  }
}

}  // namespace
