// The process grid: coordinates (tp innermost), one group per dim, clear errors for sizes that
// do not fit the world. Run as one process and under mpirun -np 2 and 4.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ch13_test_util.h"

namespace {

using ch13_test::tp_sizes;
using tt::Tensor;
namespace dist = tt::dist;
using tt::tp::ProcessGrid;

// The world ranks of `group`'s members, in group-rank order (an all_gather of each world rank).
std::vector<int64_t> members(dist::ProcessGroup& group, int world_rank) {
  Tensor mine = tt::from_vector<int64_t>({world_rank}, {1});
  Tensor all = tt::zeros({group.world_size()}, {tt::DType::kInt64});
  group.all_gather(all, mine);
  return std::vector<int64_t>(all.data<int64_t>(), all.data<int64_t>() + all.numel());
}

TEST(Ch13_ProcessGrid, CoordinatesAndGroupsMpi) {
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size(), r = world.rank();
  for (int tp : tp_sizes(n)) {
    SCOPED_TRACE("tp=" + std::to_string(tp));
    ProcessGrid grid = ProcessGrid::dp_tp(world, tp);
    const int dp = n / tp;
    ASSERT_EQ(grid.size("dp"), dp);
    ASSERT_EQ(grid.size("tp"), tp);
    // tp innermost: consecutive world ranks share a tp group.
    EXPECT_EQ(grid.coordinate("tp"), r % tp);
    EXPECT_EQ(grid.coordinate("dp"), r / tp);
    EXPECT_EQ(grid.rank_of(grid.coordinates()), r);
    EXPECT_EQ(grid.group("tp").world_size(), tp);
    EXPECT_EQ(grid.group("tp").rank(), r % tp);
    EXPECT_EQ(grid.group("dp").world_size(), dp);
    EXPECT_EQ(grid.group("dp").rank(), r / tp);
    // The members of each group, as the collectives on it see them.
    std::vector<int64_t> want_tp, want_dp;
    for (int i = 0; i < tp; ++i) want_tp.push_back(r / tp * tp + i);
    for (int j = 0; j < dp; ++j) want_dp.push_back(j * tp + r % tp);
    EXPECT_EQ(members(grid.group("tp"), r), want_tp) << grid.where();
    EXPECT_EQ(members(grid.group("dp"), r), want_dp) << grid.where();
    // A collective on one group does not involve the other: sums of 1 count the members.
    Tensor one = tt::full({1}, 1.0);
    grid.group("tp").all_reduce(one);
    EXPECT_EQ(one.data<float>()[0], static_cast<float>(tp));
  }
}

TEST(Ch13_ProcessGrid, DpTwoByTpTwoMpi) {
  dist::ProcessGroup& world = dist::world();
  if (world.world_size() != 4) {
    // The 2 x 2 grid needs 4 ranks; on any other world it must refuse, on every rank.
    EXPECT_THROW(ProcessGrid(world, {{"dp", 2}, {"tp", 2}}), tt::Error);
    world.barrier();
    return;
  }
  ProcessGrid grid(world, {{"dp", 2}, {"tp", 2}});
  // The table of tt/process_grid.h.
  const int expected_dp[4] = {0, 0, 1, 1}, expected_tp[4] = {0, 1, 0, 1};
  const std::vector<int64_t> tp_members[4] = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  const std::vector<int64_t> dp_members[4] = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  const int r = world.rank();
  EXPECT_EQ(grid.coordinate("dp"), expected_dp[r]);
  EXPECT_EQ(grid.coordinate("tp"), expected_tp[r]);
  EXPECT_EQ(members(grid.group("tp"), r), tp_members[r]);
  EXPECT_EQ(members(grid.group("dp"), r), dp_members[r]);
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(grid.coordinates_of(q), (std::vector<int>{expected_dp[q], expected_tp[q]}));
  }
  EXPECT_NE(grid.where().find("dp " + std::to_string(expected_dp[r]) + " of 2"), std::string::npos)
      << grid.where();
}

TEST(Ch13_ProcessGrid, SplitOverSeveralDimsMpi) {
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size(), r = world.rank();
  // dp x pp x cp with pp = 2 where the world allows: the dp x cp ranks of one pp coordinate
  // (chapter 16's replicas of a pipeline stage) are every other world rank.
  const int pp = n % 2 == 0 ? 2 : 1;
  ProcessGrid grid(world, {{"dp", n / pp}, {"pp", pp}, {"cp", 1}});
  std::vector<int64_t> same_stage;
  for (int q = r % pp; q < n; q += pp) same_stage.push_back(q);
  // Named in any order; numbered in grid order (dp outer), so the group rank follows the world.
  const auto replicas = grid.split_over({"cp", "dp"});
  EXPECT_EQ(replicas->world_size(), n / pp);
  EXPECT_EQ(replicas->rank(), r / pp);
  EXPECT_EQ(members(*replicas, r), same_stage) << grid.where();
  // Every dimension named: the whole world, in world order.
  const auto all = grid.split_over({"dp", "pp", "cp"});
  std::vector<int64_t> everyone(n);
  for (int q = 0; q < n; ++q) everyone[q] = q;
  EXPECT_EQ(members(*all, r), everyone);
  // One name: the members of group(name).
  EXPECT_EQ(members(*grid.split_over({"pp"}), r), members(grid.group("pp"), r));
  // Misuse, refused on every rank before any collective.
  EXPECT_THROW((void)grid.split_over({}), tt::Error);
  EXPECT_THROW((void)grid.split_over({"dp", "dp"}), tt::Error);
  EXPECT_THROW((void)grid.split_over({"tp"}), tt::Error);
  world.barrier();
}

TEST(Ch13_ProcessGrid, RejectsTpNotDividingWorldMpi) {
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size();
  for (int tp : {0, n + 1, 3}) {
    if (tp >= 1 && n % tp == 0) continue;  // 3 divides none of 1, 2, 4
    try {
      (void)ProcessGrid::dp_tp(world, tp);
      ADD_FAILURE() << "tp=" << tp << " on " << n << " ranks was accepted";
    } catch (const tt::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tp=" + std::to_string(tp)), std::string::npos) << msg;
      EXPECT_NE(msg.find("divide the world size"), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(ProcessGrid(world, {{"dp", n}, {"dp", 1}}), tt::Error);  // names not distinct
  ProcessGrid grid = ProcessGrid::dp_tp(world, 1);
  EXPECT_THROW(grid.group("pp"), tt::Error);
  // Every rank threw the same errors and took part in no collective: the world still works.
  world.barrier();
}

}  // namespace
