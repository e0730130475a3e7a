// Tests of the process group (tt/dist.h). Suites named *Mpi* also run under mpirun with 2 and 4
// ranks (see cmake/TTAddTests.cmake); the others run as one process. Values are small integers,
// so every sum is exact in float32/float64 and results are compared exactly.
#include <gtest/gtest.h>

#include "tt/dist.h"
#include "tt/ops_elementwise.h"
#include "tt/testing.h"

namespace tt::dist {
namespace {

/// t[i] = 1000 * (rank + 1) + i, as `dtype`.
Tensor rank_values(int64_t n, int rank, DType dtype) {
  return add(arange(0, static_cast<double>(n)), 1000.0 * (rank + 1)).to(dtype);
}

/// sum over ranks of rank_values: 1000 * N(N+1)/2 + N*i.
Tensor summed_values(int64_t n, int world, DType dtype) {
  return add(mul(arange(0, static_cast<double>(n)), static_cast<double>(world)),
             1000.0 * world * (world + 1) / 2)
      .to(dtype);
}

TEST(Ch12_CollectivesMpi, AllReduceSumAndAvg) {
  ProcessGroup& g = world();
  const int N = g.world_size();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    Tensor t = rank_values(7, g.rank(), dtype);
    g.all_reduce(t, ReduceOp::kSum);
    EXPECT_TENSOR_NEAR(t, summed_values(7, N, dtype), 0, 0) << dtype_name(dtype);
  }
  Tensor a = rank_values(5, g.rank(), DType::kFloat64).view({5, 1});
  g.all_reduce(a, ReduceOp::kAvg);
  EXPECT_TENSOR_NEAR(a, div(summed_values(5, N, DType::kFloat64), N).view({5, 1}), 0, 1e-15);
}

TEST(Ch12_CollectivesMpi, BroadcastReduceScatterAllGather) {
  ProcessGroup& g = world();
  const int N = g.world_size(), r = g.rank();
  // broadcast from the last rank
  Tensor b = rank_values(6, r, DType::kFloat32);
  g.broadcast(b, N - 1);
  EXPECT_TENSOR_NEAR(b, rank_values(6, N - 1, DType::kFloat32), 0, 0);
  // reduce_scatter: 3 elements per rank
  Tensor in = rank_values(3 * N, r, DType::kFloat64);
  Tensor out = zeros({3}, {.dtype = DType::kFloat64});
  g.reduce_scatter(out, in, ReduceOp::kSum);
  EXPECT_TENSOR_NEAR(out, summed_values(3 * N, N, DType::kFloat64).narrow(0, 3 * r, 3), 0, 0);
  g.reduce_scatter(out, in, ReduceOp::kAvg);
  EXPECT_TENSOR_NEAR(out, div(summed_values(3 * N, N, DType::kFloat64), N).narrow(0, 3 * r, 3), 0,
                     1e-15);
  // all_gather: rank r contributes {r, r}
  Tensor mine = full({2}, r, {.dtype = DType::kInt64});
  Tensor all = zeros({2 * N}, {.dtype = DType::kInt64});
  g.all_gather(all, mine);
  for (int q = 0; q < N; ++q) {
    EXPECT_EQ(all.at<int64_t>({2 * q}), q);
    EXPECT_EQ(all.at<int64_t>({2 * q + 1}), q);
  }
  g.barrier();
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
