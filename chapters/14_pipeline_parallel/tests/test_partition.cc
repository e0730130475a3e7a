// Stage partitioning by cost: the largest stage is as small as possible (checked against every
// cut of small random cost lists), ties broken the documented way, clear errors for more stages
// than layers; GPT-2's layouts give the head's stage fewer blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tt/error.h"
#include "tt/generator.h"
#include "tt/gpt2.h"
#include "tt/pipeline.h"

namespace {

using tt::pp::partition_by_cost;

// The smallest largest part over every cut of `costs` into `parts` non-empty runs.
double brute_force(const std::vector<double>& costs, int parts) {
  const int n = static_cast<int>(costs.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> b{0};
  std::function<void(int)> go = [&](int from) {
    if (static_cast<int>(b.size()) == parts) {
      b.push_back(n);
      best = std::min(best, tt::pp::max_part_cost(costs, b));
      b.pop_back();
      return;
    }
    for (int j = from + 1; j <= n - (parts - static_cast<int>(b.size())); ++j) {
      b.push_back(j);
      go(j);
      b.pop_back();
    }
  };
  go(0);
  return best;
}

TEST(Ch14_3_Partition, Tables) {
  EXPECT_EQ(partition_by_cost(std::vector<double>(8, 1.0), 4), (std::vector<int>{0, 2, 4, 6, 8}));
  EXPECT_EQ(partition_by_cost(std::vector<double>(5, 1.0), 1), (std::vector<int>{0, 5}));
  EXPECT_EQ(partition_by_cost(std::vector<double>(3, 1.0), 3), (std::vector<int>{0, 1, 2, 3}));
  // A heavy last layer (GPT-2's head): the last stage gets fewer layers.
  EXPECT_EQ(partition_by_cost({1, 1, 1, 1, 1, 1, 1, 4}, 2), (std::vector<int>{0, 5, 8}));
  EXPECT_EQ(partition_by_cost({1, 1, 1, 1, 4}, 2), (std::vector<int>{0, 4, 5}));
  // A heavy first layer sets the optimum (5); the rest is still balanced (3 and 3, not 1 and 4).
  EXPECT_EQ(partition_by_cost({5, 1, 1, 1, 1, 1}, 3), (std::vector<int>{0, 1, 3, 6}));
  // Zero costs are allowed; every part still holds a layer.
  EXPECT_EQ(partition_by_cost({0, 0, 0}, 3), (std::vector<int>{0, 1, 2, 3}));
}

TEST(Ch14_3_Partition, OptimalOnRandomCosts) {
  tt::Generator gen(14);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(gen.next_u64() % 8);
    const int parts = 1 + static_cast<int>(gen.next_u64() % static_cast<uint64_t>(n));
    std::vector<double> costs(static_cast<std::size_t>(n));
    for (double& c : costs) c = static_cast<double>(gen.next_u64() % 10);
    const std::vector<int> b = partition_by_cost(costs, parts);
    ASSERT_EQ(static_cast<int>(b.size()), parts + 1);
    EXPECT_EQ(b.front(), 0);
    EXPECT_EQ(b.back(), n);
    for (int i = 0; i + 1 < static_cast<int>(b.size()); ++i) EXPECT_LT(b[i], b[i + 1]);
    EXPECT_EQ(tt::pp::max_part_cost(costs, b), brute_force(costs, parts))
        << "trial " << trial << ": n=" << n << " parts=" << parts;
  }
}

TEST(Ch14_3_Partition, MoreStagesThanLayersIsRefused) {
  try {
    (void)partition_by_cost({1, 2, 3}, 4);
    ADD_FAILURE() << "4 stages of 3 layers were accepted";
  } catch (const tt::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("3 layers into 4 stages"), std::string::npos) << m;
    EXPECT_NE(m.find("more stages than layers"), std::string::npos) << m;
  }
  EXPECT_THROW((void)partition_by_cost({1, 2}, 0), tt::Error);
  EXPECT_THROW((void)partition_by_cost({1, -2}, 1), tt::Error);
}

TEST(Ch14_Partition, Gpt2Layouts) {
  // GPT-2 124M at T = 1024: the head (6 C V FLOPs per token) costs about 4.4 blocks, so with 2
  // stages the second gets fewer of the 12 blocks.
  const tt::gpt2::GPT2Config c124m;
  const auto costs = tt::pp::gpt2_block_costs(c124m, 1024);
  ASSERT_EQ(costs.size(), 12u);
  EXPECT_GT(costs.back(), 4 * costs.front());
  const auto layers = tt::pp::gpt2_stage_layers(c124m, 2);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_TRUE(layers[0].embedding && !layers[0].head);
  EXPECT_TRUE(layers[1].head && !layers[1].embedding);
  EXPECT_EQ(layers[0].begin, 0);
  EXPECT_EQ(layers[0].end, layers[1].begin);
  EXPECT_EQ(layers[1].end, 12);
  EXPECT_GT(layers[0].end - layers[0].begin, layers[1].end - layers[1].begin);
  // Uniform costs: equal blocks per stage.
  const auto even = tt::pp::gpt2_stage_layers(c124m, 4, std::vector<double>(12, 1.0));
  for (const auto& l : even) EXPECT_EQ(l.end - l.begin, 3);
  EXPECT_THROW((void)tt::pp::gpt2_stage_layers(c124m, 13), tt::Error);
}

}  // namespace
