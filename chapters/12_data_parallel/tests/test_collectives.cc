// Tests of the process group (tt/dist.h). Suites named *Mpi* also run under mpirun with 2 and 4
// ranks (see cmake/TTAddTests.cmake); the others run as one process. Values are small integers,
// so every sum is exact in float32/float64 and results are compared exactly.
#include <gtest/gtest.h>

#include "ch12_test_util.h"
#include "tt/dist.h"
#include "tt/ops_elementwise.h"
#include "tt/testing.h"

namespace tt::dist {
namespace {

TEST(Ch12_CollectivesMpi, AllReduceSumAndAvg) {
  ch12_test::expect_all_reduce_sum_and_avg(world(), Device::cpu(), 7);
}

TEST(Ch12_CollectivesMpi, BroadcastReduceScatterAllGather) {
  ch12_test::expect_broadcast_reduce_scatter_all_gather(world(), Device::cpu());
}

TEST(Ch12_CollectivesMpi, SendRecvAroundTheRing) {
  ProcessGroup& g = world();
  const int N = g.world_size(), r = g.rank();
  Tensor got = zeros({4});
  g.send_recv(full({4}, r), (r + 1) % N, got, (r + N - 1) % N);
  EXPECT_TENSOR_NEAR(got, full({4}, (r + N - 1) % N), 0, 0);
  if (N == 1) return;  // blocking send/recv need a peer
  if (r == 0) g.send(full({3}, 42.0), 1, 7);
  if (r == 1) {
    Tensor x = zeros({3});
    g.recv(x, 0, 7);
    EXPECT_TENSOR_NEAR(x, full({3}, 42.0), 0, 0);
  }
  // A message shorter than the receive buffer is a mismatched pair of calls: an error.
  if (r == 0) g.send(full({2}, 1.0), 1, 8);
  if (r == 1) {
    EXPECT_TT_ERROR(g.recv(zeros({3}), 0, 8), "recv", "received 2 elements from rank 0");
  }
}

TEST(Ch12_MultiRankMpi, MismatchedSizesThrowOnEveryRank) {
  ProcessGroup& g = world();
  if (g.world_size() == 1) GTEST_SKIP() << "needs at least 2 ranks (ctest runs it with mpirun)";
  const int64_t n = g.rank() == 0 ? 5 : 6;
  EXPECT_TT_ERROR(g.all_reduce(zeros({n})), "all_reduce", "disagree",
                  "rank " + std::to_string(g.rank()), "element counts range over [5, 6]");
  // Every rank threw after the (completed) agreement check, so the group is still usable.
  Tensor one = ones({1});
  g.all_reduce(one);
  EXPECT_EQ(one.item(), g.world_size());
}

TEST(Ch12_MultiRankMpi, MismatchedCollectivesThrowOnEveryRank) {
  ProcessGroup& g = world();
  if (g.world_size() == 1) GTEST_SKIP() << "needs at least 2 ranks (ctest runs it with mpirun)";
  Tensor t = zeros({4});
  if (g.rank() == 0) {
    EXPECT_TT_ERROR(g.all_reduce(t), "all_reduce",
                    "some ranks called all_reduce and others broadcast");
  } else {
    EXPECT_TT_ERROR(g.broadcast(t, 0), "broadcast",
                    "some ranks called all_reduce and others broadcast");
  }
  // The group is still usable: the check itself completed on every rank.
  Tensor one = ones({1});
  g.all_reduce(one);
  EXPECT_EQ(one.item(), g.world_size());
}

TEST(Ch12_ProcessGroup, ArgumentErrorsNameTheCallAndTensor) {
  ProcessGroup g(make_self_backend());
  EXPECT_EQ(g.world_size(), 1);
  EXPECT_EQ(g.backend_name(), "self");
  const Tensor t = zeros({2, 3});
  testing::expect_errors({
      {"non-contiguous",
       [&] { g.all_reduce(t.transpose(0, 1)); },
       {"all_reduce", "not contiguous", "[3, 2]"}},
      {"avg of int64",
       [&] { g.all_reduce(zeros({2}, {.dtype = DType::kInt64}), ReduceOp::kAvg); },
       {"all_reduce", "avg", "int64"}},
      {"undefined", [&] { g.broadcast(Tensor()); }, {"broadcast", "undefined"}},
      {"root out of range", [&] { g.broadcast(t, 1); }, {"broadcast", "peer rank 1"}},
      {"reduce_scatter sizes",
       [&] { g.reduce_scatter(zeros({2}), zeros({3})); },
       {"reduce_scatter", "world_size (1)"}},
      {"all_gather dtypes",
       [&] { g.all_gather(zeros({2}), zeros({2}, {.dtype = DType::kFloat64})); },
       {"all_gather", "same dtype"}},
      {"send to itself", [&] { g.send(t, 0); }, {"send", "never completes"}},
      {"timeout", [&] { g.set_timeout_seconds(0); }, {"set_timeout_seconds", "> 0"}},
  });
}

TEST(Ch12_ProcessGroup, SelfWorldIsTheIdentity) {
  ProcessGroup g(make_self_backend());
  Tensor t = arange(0, 6).view({2, 3});
  const Tensor expected = t.clone();
  g.all_reduce(t, ReduceOp::kAvg);
  g.broadcast(t, 0);
  EXPECT_TENSOR_NEAR(t, expected, 0, 0);
  Tensor out = zeros({6});
  g.reduce_scatter(out, t.view({6}));
  EXPECT_TENSOR_NEAR(out, expected.view({6}), 0, 0);
  g.all_gather(out, t.view({6}));
  EXPECT_TENSOR_NEAR(out, expected.view({6}), 0, 0);
  EXPECT_EQ(g.bytes_communicated(), 4 * 6 * 4);
}

}  // namespace
}  // namespace tt::dist
