// Exercise ch12.1: the hand-written ring all-reduce against MPI's all-reduce (ProcessGroup).
#include <gtest/gtest.h>

#include <cstring>

#include "tt/ops_elementwise.h"
#include "tt/ring_all_reduce.h"
#include "tt/testing.h"

namespace tt::dist {
namespace {

/// Sizes around the world size N: empty, smaller than N, not divisible by N, large.
std::vector<int64_t> odd_sizes(int64_t N) {
  return {0, 1, N - 1, N + 1, 2 * N + 1, 7, 1001, 4099};
}

TEST(Ch12_1_RingAllReduceMpi, EqualsMpiAllReduceOnOddSizes) {
  ProcessGroup& g = world();
  for (int64_t n : odd_sizes(g.world_size())) {
    if (n < 0) continue;
    // Small integers: every summation order gives the exact sum, so the ring must equal MPI's
    // result bit for bit.
    Generator gen(7 + static_cast<uint64_t>(g.rank()));
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = static_cast<float>(gen.next_u64() % 201) - 100.0f;
    Tensor ring = from_vector<float>(v, {n});
    Tensor mpi = ring.clone();
    ring_all_reduce(g, ring);
    g.all_reduce(mpi);
    EXPECT_TENSOR_NEAR(ring, mpi, 0, 0) << "n = " << n;
  }
}

TEST(Ch12_1_RingAllReduceMpi, RandomFloatsAvgAndIdenticalOnEveryRank) {
  ProcessGroup& g = world();
  for (int64_t n : odd_sizes(g.world_size())) {
    Generator gen(11 + static_cast<uint64_t>(g.rank()));
    Tensor ring = randn({n}, gen, {.dtype = DType::kFloat64});
    Tensor mpi = ring.clone();
    ring_all_reduce(g, ring, ReduceOp::kAvg);
    g.all_reduce(mpi, ReduceOp::kAvg);
    // Another summation order than MPI's: equal up to rounding (float64, |x| ~ 1).
    EXPECT_TENSOR_NEAR(ring, mpi, 1e-14, 1e-14) << "n = " << n;
    // Each chunk is summed once and then copied: all ranks hold the same bits.
    Tensor root = ring.clone();
    g.broadcast(root, 0);
    if (n > 0) {  // (an empty tensor has no data pointer)
      EXPECT_EQ(std::memcmp(root.data_ptr(), ring.data_ptr(), static_cast<std::size_t>(n) * 8), 0)
          << g.where() << ", n = " << n;
    }
  }
}

TEST(Ch12_1_RingAllReduceMpi, KeepsTheShape) {
  ProcessGroup& g = world();
  Tensor t = ones({3, 5});
  ring_all_reduce(g, t);
  EXPECT_EQ(t.shape(), (Shape{3, 5}));
  EXPECT_TENSOR_NEAR(t, full({3, 5}, g.world_size()), 0, 0);
}

TEST(Ch12_1_RingAllReduce, RejectsWhatItCannotReduce) {
  ProcessGroup g(make_self_backend());
  EXPECT_TT_ERROR(ring_all_reduce(g, zeros({2, 3}).transpose(0, 1)), "ring_all_reduce",
                  "contiguous");
  EXPECT_TT_ERROR(ring_all_reduce(g, zeros({2}, {.dtype = DType::kInt64})), "ring_all_reduce",
                  "int64");
}

TEST(Ch12_1_ChunkBegin, CoversEveryElementOnce) {
  for (int64_t n : {0, 1, 3, 10, 11}) {
    for (int64_t parts : {1, 2, 3, 4, 7}) {
      EXPECT_EQ(chunk_begin(n, parts, 0), 0);
      EXPECT_EQ(chunk_begin(n, parts, parts), n);
      for (int64_t c = 0; c < parts; ++c) {
        const int64_t size = chunk_begin(n, parts, c + 1) - chunk_begin(n, parts, c);
        EXPECT_TRUE(size == n / parts || size == n / parts + 1) << n << " " << parts << " " << c;
      }
    }
  }
}

}  // namespace
}  // namespace tt::dist
