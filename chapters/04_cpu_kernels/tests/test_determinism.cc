// What the thread count changes (README, "Determinism"): nothing in our own kernels (fixed
// partitions, see the SameBitsForAnyThreadCount tests; the default "matmul" kernel, matmul_fma,
// is one FMA chain per element whatever the split), and, in Eigen's GEMM (matmul_eigen, the
// default in a build without FMA instructions), only the split of K between one thread and
// several: a multi-threaded product sums K in fixed blocks of at most 320 (fewer with a small
// L1), a single-threaded one in blocks it derives from the L1 size and K. So 1 vs 2 threads
// agree bit for bit for small K, any two thread counts >= 2 agree for every K, and 1 vs 2
// threads may differ in the last bits for large K.
#include <vector>

#include "ch04_test_util.h"
#include "tt/functional.h"
#include "tt/testing.h"

namespace tt {
namespace {

using test04::same_bits;

/// a [M, K] @ b [K, 384] with `threads` threads, through the given algorithm.
std::vector<float> product(int64_t M, int64_t K, int threads, MatmulAlgo algo) {
  Generator gen(static_cast<uint64_t>(K));
  const Tensor a = randn({M, K}, gen), b = randn({K, 384}, gen);
  const ScopedNumThreads scoped(threads);
  return matmul(a, b, algo).to_vector<float>();
}

TEST(Ch04_Determinism, EigenGemmDependsOnlyOnOneVersusSeveralThreadsAndOnlyForLargeK) {
  // [128, K] @ [K, 384] is large enough for Eigen to use 2 threads.
  const auto small_k_one = product(128, 256, 1, MatmulAlgo::kEigen);
  EXPECT_TRUE(same_bits(small_k_one, product(128, 256, 2, MatmulAlgo::kEigen)))
      << "K = 256 fits one K block with 1 and with 2 threads";
  const auto large_k_two = product(128, 1024, 2, MatmulAlgo::kEigen);
  EXPECT_TRUE(same_bits(large_k_two, product(128, 1024, 3, MatmulAlgo::kEigen)))
      << "2 and 3 threads use the same K blocks";
  const auto large_k_one = product(128, 1024, 1, MatmulAlgo::kEigen);
  EXPECT_TENSOR_NEAR(from_vector(large_k_one), from_vector(large_k_two), 1e-4, 1e-5);
  // Our blocked kernel sums every K in the same order for any thread count.
  EXPECT_TRUE(same_bits(product(128, 1024, 1, MatmulAlgo::kBlocked),
                        product(128, 1024, 2, MatmulAlgo::kBlocked)));
  // So does the FMA kernel (the default "matmul" on FMA hardware).
  EXPECT_TRUE(
      same_bits(product(128, 1024, 1, MatmulAlgo::kFma), product(128, 1024, 2, MatmulAlgo::kFma)));
}

}  // namespace
}  // namespace tt
