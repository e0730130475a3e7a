// Tests of the matmul kernels (exercises ch04.5 naive, ch04.6 blocked, ch04.7 Eigen, and the
// given FMA kernel), the front-end (ch04.8) and the backward (ch04.9), against a float64
// reference computed here.
#include <cmath>
#include <functional>
#include <limits>

#include "ch04_test_util.h"
#include "tt/cpu_gemm.h"
#include "tt/functional.h"

namespace tt {
namespace {

using test04::f64;
using test04::gradcheck_ok;
using test04::leaf64;
using test04::randn_t;
using test04::same_bits;

// Reference C = A @ B in float64 for 3-D operands with equal batch sizes (any layout, any
// dtype): given code only (expand, contiguous, to, to_vector).
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const std::vector<double> va = a.to(DType::kFloat64).contiguous().to_vector<double>();
  const std::vector<double> vb = b.to(DType::kFloat64).contiguous().to_vector<double>();
  std::vector<double> vc(static_cast<std::size_t>(batch * M * N), 0.0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j)
          vc[(p * M + i) * N + j] += va[(p * M + i) * K + k] * vb[(p * K + k) * N + j];
  return from_vector(vc, {batch, M, N});
}

// One kernel case: out = a @ b with a [batch, M, K] and b [batch, K, N] built as requested.
struct Case {
  int64_t batch, M, K, N;
  bool a_transposed, b_transposed, b_broadcast;
};

// Runs `kernel` on several layouts and sizes (tile edges, K across blocks, transposed and
// broadcast operands) in float32 and float64 and compares with the float64 reference.
void check_kernel(MatmulKernel* kernel) {
  const Case cases[] = {
      {1, 1, 1, 1, false, false, false},    {1, 5, 3, 4, false, false, false},
      {1, 7, 300, 37, false, false, false}, {2, 75, 40, 260, true, false, false},
      {3, 13, 17, 19, false, true, true},   {2, 6, 33, 16, true, true, false},
  };
  uint64_t seed = 100;
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << "batch " << c.batch << " M " << c.M << " K " << c.K
                                        << " N " << c.N << " dtype " << dtype_name(dtype));
      // A transposed operand is stored [batch, cols, rows] and viewed transposed (column-major).
      Tensor a = c.a_transposed ? randn_t({c.batch, c.K, c.M}, seed++, dtype).transpose(1, 2)
                                : randn_t({c.batch, c.M, c.K}, seed++, dtype);
      Tensor b = c.b_transposed ? randn_t({1, c.N, c.K}, seed++, dtype).transpose(1, 2)
                                : randn_t({1, c.K, c.N}, seed++, dtype);
      // Broadcast batch (stride 0) or a real per-batch b.
      b = c.b_broadcast
              ? b.expand({c.batch, c.K, c.N})
              : (c.b_transposed ? randn_t({c.batch, c.N, c.K}, seed++, dtype).transpose(1, 2)
                                : randn_t({c.batch, c.K, c.N}, seed++, dtype));
      Tensor out = empty({c.batch, c.M, c.N}, {dtype});
      kernel(out, a, b);
      const double tol = dtype == DType::kFloat32 ? 2e-5 * c.K : 1e-12 * c.K;
      EXPECT_TENSOR_NEAR(out.to(DType::kFloat64), ref_matmul(a, b), tol, tol);
    }
  }
  // K = 0: every output is an empty sum.
  Tensor out = full({1, 2, 3}, 7.0);
  kernel(out, empty({1, 2, 0}), empty({1, 0, 3}));
  EXPECT_TENSOR_NEAR(out, zeros({1, 2, 3}), 0, 0);
}

// ----- ch04.5 - ch04.7 kernels ------------------------------------------------------------------

TEST(Ch04_5_MatmulNaive, MatchesFloat64Reference) {
  check_kernel(&cpu::matmul_naive);
}

TEST(Ch04_6_MatmulBlocked, MatchesFloat64Reference) {
  check_kernel(&cpu::matmul_blocked);
}

TEST(Ch04_6_MatmulBlocked, ThreadCountDoesNotChangeBits) {
  Tensor a = randn_t({1, 150, 600}, 1, DType::kFloat32),
         b = randn_t({1, 600, 300}, 2, DType::kFloat32);
  const int saved = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor out = empty({1, 150, 300});
    cpu::matmul_blocked(out, a, b);
    results.push_back(out.to_vector<float>());
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
}

TEST(Ch04_7_MatmulEigen, MatchesFloat64Reference) {
  check_kernel(&cpu::matmul_eigen);
}

TEST(Ch04_7_MatmulEigen, AgreesWithTheOtherKernels) {
  Tensor a = randn_t({2, 64, 200}, 3, DType::kFloat32),
         b = randn_t({2, 200, 96}, 4, DType::kFloat32);
  Tensor e = empty({2, 64, 96}), n = empty({2, 64, 96}), k = empty({2, 64, 96});
  cpu::matmul_eigen(e, a, b);
  cpu::matmul_naive(n, a, b);
  cpu::matmul_blocked(k, a, b);
  EXPECT_TENSOR_NEAR(e, n, 1e-4, 1e-4);
  EXPECT_TENSOR_NEAR(k, n, 1e-4, 1e-4);
}

// ----- the given FMA kernel (tt/cpu_gemm.h) ---------------------------------------------------

TEST(Ch04_CpuGemm, MatchesFloat64Reference) {
  check_kernel(&cpu::matmul_fma);
}

/// c = c0 + a @ b as std::fma chains in k order (c0 = c when accumulate, else 0): the contract
/// of gemm_fma, written as plainly as possible.
template <typename T>
void fma_chain(int64_t M, int64_t N, int64_t K, cpu::StridedMatrix<T> a, cpu::StridedMatrix<T> b,
               T* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      T acc = accumulate ? c[i * ldc + j] : T(0);
      for (int64_t k = 0; k < K; ++k) {
        acc = std::fma(a.data[i * a.rs + k * a.cs], b.data[k * b.rs + j * b.cs], acc);
      }
      c[i * ldc + j] = acc;
    }
  }
}

/// gemm_fma against fma_chain, bit for bit, for one shape in every layout of a and b, with
/// padded rows of c whose padding must stay untouched, overwriting and accumulating.
template <typename T>
void check_fma_bits(int64_t M, int64_t N, int64_t K, uint64_t seed) {
  const DType dtype = std::is_same_v<T, float> ? DType::kFloat32 : DType::kFloat64;
  const std::vector<T> va = randn_t({M * K + 1}, seed, dtype).to_vector<T>();
  const std::vector<T> vb = randn_t({K * N + 1}, seed + 1, dtype).to_vector<T>();
  const std::vector<T> vc = randn_t({M * (N + 3) + 1}, seed + 2, dtype).to_vector<T>();
  const int64_t ldc = N + 3;
  const T sentinel = std::numeric_limits<T>::quiet_NaN();
  for (bool a_col : {false, true}) {
    for (bool b_col : {false, true}) {
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "M " << M << " N " << N << " K " << K << " a " << (a_col ? "col" : "row")
                     << "-major, b " << (b_col ? "col" : "row") << "-major, accumulate "
                     << accumulate << ", " << cpu::gemm_fma_isa());
        const cpu::StridedMatrix<T> a{va.data(), a_col ? 1 : K, a_col ? M : 1};
        const cpu::StridedMatrix<T> b{vb.data(), b_col ? 1 : N, b_col ? K : 1};
        std::vector<T> got(vc), want(vc);
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = N; j < ldc; ++j) got[i * ldc + j] = want[i * ldc + j] = sentinel;
          // Not accumulating, c is never read: NaN there must not reach the result.
          if (!accumulate) std::fill(got.begin() + i * ldc, got.begin() + i * ldc + N, sentinel);
        }
        cpu::gemm_fma<T>(M, N, K, a, b, got.data(), ldc, accumulate);
        fma_chain<T>(M, N, K, a, b, want.data(), ldc, accumulate);
        EXPECT_TRUE(same_bits(got, want)) << "gemm_fma is not the FMA chain in k order";
      }
    }
  }
}

TEST(Ch04_CpuGemm, EveryElementIsOneFmaChainInKOrder) {
  // Edges of every block: M across MC (120) and MR, N across NC (512) and NR, K across KC (256).
  const int64_t shapes[][3] = {{1, 1, 1}, {13, 37, 300}, {121, 40, 9}, {7, 530, 520}};
  uint64_t seed = 700;
  for (const auto& s : shapes) {
    check_fma_bits<float>(s[0], s[1], s[2], seed += 3);
    check_fma_bits<double>(s[0], s[1], s[2], seed += 3);
  }
}

TEST(Ch04_CpuGemm, SameBitsForAnyThreadCount) {
  // Split along M (M >= N) and along N (N > M); K spans 3 blocks.
  const std::pair<int64_t, int64_t> mn[] = {{250, 100}, {40, 700}};
  for (const auto& [M, N] : mn) {
    const int64_t K = 700;
    const std::vector<float> va = randn_t({M * K}, 11, DType::kFloat32).to_vector<float>();
    const std::vector<float> vb = randn_t({K * N}, 12, DType::kFloat32).to_vector<float>();
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      const ScopedNumThreads scoped(threads);
      std::vector<float> c(static_cast<std::size_t>(M * N));
      cpu::gemm_fma<float>(M, N, K, {va.data(), K, 1}, {vb.data(), N, 1}, c.data(), N, false);
      results.push_back(std::move(c));
    }
    EXPECT_TRUE(same_bits(results[0], results[1])) << "1 vs 2 threads, M " << M << " N " << N;
    EXPECT_TRUE(same_bits(results[0], results[2])) << "1 vs 3 threads, M " << M << " N " << N;
  }
}

TEST(Ch04_CpuGemm, EmptyProducts) {
  std::vector<float> c{1, 2, 3, 4, 5, 6};
  cpu::gemm_fma<float>(2, 3, 0, {nullptr, 0, 1}, {nullptr, 3, 1}, c.data(), 3, true);
  EXPECT_EQ(c, (std::vector<float>{1, 2, 3, 4, 5, 6})) << "K = 0, accumulating: c unchanged";
  cpu::gemm_fma<float>(2, 3, 0, {nullptr, 0, 1}, {nullptr, 3, 1}, c.data(), 3, false);
  EXPECT_EQ(c, std::vector<float>(6, 0.f)) << "K = 0: an empty sum is 0";
  cpu::gemm_fma<float>(0, 3, 4, {nullptr, 4, 1}, {nullptr, 3, 1}, nullptr, 3, false);  // no rows
}

TEST(Ch04_CpuGemm, DefaultMatmulIsTheFmaKernelOnFmaHardware) {
  const Tensor a = randn_t({2, 70, 300}, 21, DType::kFloat32);
  const Tensor b = randn_t({300, 90}, 22, DType::kFloat32);
  const std::vector<float> def = matmul(a, b).to_vector<float>();
  const MatmulAlgo expected = cpu::gemm_fma_is_native() ? MatmulAlgo::kFma : MatmulAlgo::kEigen;
  EXPECT_TRUE(same_bits(def, matmul(a, b, expected).to_vector<float>()))
      << "\"matmul\" should be " << matmul_kernel_name(expected)
      << " (gemm_fma's ISA here: " << cpu::gemm_fma_isa() << ")";
}

// ----- ch04.8 front-end ------------------------------------------------------------------------

TEST(Ch04_8_MatmulForward, BroadcastsBatchDims) {
  Tensor a = randn_t({2, 1, 4, 5}, 10), b = randn_t({3, 5, 6}, 11);
  Tensor c = matmul_forward(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 3, 4, 6}));
  Tensor ref = ref_matmul(a.expand({2, 3, 4, 5}).reshape({6, 4, 5}),
                          b.expand({2, 3, 5, 6}).reshape({6, 5, 6}));
  EXPECT_TENSOR_NEAR(c.reshape({6, 4, 6}), ref, 1e-12, 1e-12);
}

TEST(Ch04_8_MatmulForward, SharedRightOperandAndLayouts) {
  // [B, T, C] @ [C, N] (folded into one GEMM), with a transposed b and a sliced a.
  Tensor a = randn_t({2, 3, 8}, 12).slice(2, 0, 8, 2);  // [2, 3, 4], non-contiguous rows
  Tensor w = randn_t({6, 4}, 13).transpose(0, 1);       // [4, 6], column-major
  for (MatmulAlgo algo :
       {MatmulAlgo::kNaive, MatmulAlgo::kBlocked, MatmulAlgo::kEigen, MatmulAlgo::kFma}) {
    Tensor c = matmul_forward(a, w, algo);
    ASSERT_EQ(c.shape(), (Shape{2, 3, 6}));
    EXPECT_TENSOR_NEAR(c.reshape({1, 6, 6}), ref_matmul(a.reshape({1, 6, 4}), w.unsqueeze(0)),
                       1e-12, 1e-12);
  }
}

TEST(Ch04_8_MatmulForward, ErrorsNameShapesAndDtypes) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  EXPECT_TT_ERROR(matmul_forward(a, b), "matmul", "[2, 3]", "[4, 5]", "float32");
  EXPECT_TT_ERROR(matmul_forward(zeros({2, 2, 3}), zeros({3, 3, 4})), "matmul", "[2]", "[3]");
  EXPECT_TT_ERROR(matmul_forward(a, zeros({3, 2}, {DType::kFloat64})), "matmul", "float32",
                  "float64");
  EXPECT_TT_ERROR(matmul_forward(zeros({2, 2}, {DType::kInt64}), zeros({2, 2}, {DType::kInt64})),
                  "matmul", "int64");
  EXPECT_TT_ERROR(matmul_forward(zeros({3}), zeros({3, 2})), "matmul", "[3]");
}

// ----- ch04.9 backward -------------------------------------------------------------------------

TEST(Ch04_9_MatmulBackward, TwoDimensional) {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}), b = f64({1, 0, -1, 2, 0.5, 1}, {3, 2});
  Tensor g = f64({1, -1, 2, 0.5}, {2, 2});
  auto [ga, gb] = matmul_backward(g, a, b);
  // dA = G B^T, dB = A^T G
  EXPECT_TENSOR_NEAR(ga, ref_matmul(g.unsqueeze(0), b.transpose(0, 1).unsqueeze(0)).squeeze(0),
                     1e-14, 0);
  EXPECT_TENSOR_NEAR(gb, ref_matmul(a.transpose(0, 1).unsqueeze(0), g.unsqueeze(0)).squeeze(0),
                     1e-14, 0);
}

TEST(Ch04_9_MatmulBackward, BroadcastOperandsGetSummedGradients) {
  // a [2, 3, 4] @ b [4, 5]: b's gradient is the sum over the batch of A_p^T G_p.
  Tensor a = randn_t({2, 3, 4}, 20), b = randn_t({4, 5}, 21), g = randn_t({2, 3, 5}, 22);
  auto [ga, gb] = matmul_backward(g, a, b);
  ASSERT_EQ(ga.shape(), (Shape{2, 3, 4}));
  ASSERT_EQ(gb.shape(), (Shape{4, 5}));
  EXPECT_TENSOR_NEAR(ga, ref_matmul(g, b.transpose(0, 1).expand({2, 5, 4})), 1e-12, 1e-12);
  Tensor per_batch = ref_matmul(a.transpose(1, 2), g);  // [2, 4, 5]
  EXPECT_TENSOR_NEAR(gb, (per_batch.select(0, 0) + per_batch.select(0, 1)), 1e-12, 1e-12);
  // a [1, 3, 4] broadcast against b [2, 4, 5]: a's gradient sums over the batch.
  Tensor a1 = randn_t({1, 3, 4}, 23), b2 = randn_t({2, 4, 5}, 24);
  auto [ga1, gb2] = matmul_backward(g, a1, b2, MatmulAlgo::kDefault, true, false);
  EXPECT_FALSE(gb2.defined());
  ASSERT_EQ(ga1.shape(), (Shape{1, 3, 4}));
  Tensor per = ref_matmul(g, b2.transpose(1, 2));
  EXPECT_TENSOR_NEAR(ga1.squeeze(0), per.select(0, 0) + per.select(0, 1), 1e-12, 1e-12);
}

TEST(Ch04_9_MatmulBackward, TransposedSharedBGetsItsGradientInItsLayout) {
  // A linear layer: x [2, 3, 4] @ W^T with W [5, 4]. W's gradient (the transpose of b's) must be
  // contiguous, so that .grad stores it with a plain copy; a row-major b keeps a row-major one.
  Tensor x = randn_t({2, 3, 4}, 25), w = randn_t({5, 4}, 26), g = randn_t({2, 3, 5}, 27);
  const Tensor ref =
      ref_matmul(x.reshape({6, 4}).transpose(0, 1).unsqueeze(0), g.reshape({6, 5}).unsqueeze(0))
          .squeeze(0);  // [4, 5]
  for (MatmulAlgo algo : {MatmulAlgo::kDefault, MatmulAlgo::kFma}) {
    auto [gx, gwt] = matmul_backward(g, x, w.transpose(0, 1), algo, false, true);
    EXPECT_FALSE(gx.defined());
    ASSERT_EQ(gwt.shape(), (Shape{4, 5}));
    EXPECT_EQ(gwt.strides(), (Strides{1, 4})) << "b = W^T is stored transposed: so is its gradient";
    EXPECT_TRUE(gwt.transpose(0, 1).is_contiguous());
    EXPECT_TENSOR_NEAR(gwt, ref, 1e-12, 1e-12);
    auto [gx2, gb] = matmul_backward(g, x, w.transpose(0, 1).contiguous(), algo, false, true);
    EXPECT_TRUE(gb.is_contiguous());
    if (algo == MatmulAlgo::kFma) {  // one FMA chain per element in k order: the same bits
      EXPECT_TRUE(same_bits(gwt.contiguous().to_vector<double>(), gb.to_vector<double>()));
    }
  }
}

// ----- autograd through matmul (given code) ------------------------------------------------------

TEST(Ch04_Matmul, GradcheckEveryAlgoAndShape) {
  for (MatmulAlgo algo :
       {MatmulAlgo::kNaive, MatmulAlgo::kBlocked, MatmulAlgo::kEigen, MatmulAlgo::kFma}) {
    auto mm = [algo](const std::vector<Tensor>& in) { return matmul(in[0], in[1], algo); };
    EXPECT_TRUE(gradcheck_ok(mm, {leaf64({3, 4}, 30), leaf64({4, 2}, 31)}));
    EXPECT_TRUE(gradcheck_ok(mm, {leaf64({2, 3, 4}, 32), leaf64({4, 5}, 33)}));
    EXPECT_TRUE(gradcheck_ok(mm, {leaf64({2, 1, 3, 4}, 34), leaf64({3, 4, 2}, 35)}));
    EXPECT_TRUE(gradcheck_ok(mm, {leaf64({4}, 36), leaf64({2, 4, 3}, 37)}));
    EXPECT_TRUE(gradcheck_ok(mm, {leaf64({3, 4}, 38), leaf64({4}, 39)}));
    EXPECT_TRUE(gradcheck_ok(mm, {leaf64({4}, 40), leaf64({4}, 41)}));
  }
}

TEST(Ch04_Matmul, VectorPromotionShapes) {
  EXPECT_EQ(matmul(zeros({3}), zeros({3})).shape(), (Shape{}));
  EXPECT_EQ(matmul(zeros({3}), zeros({2, 3, 5})).shape(), (Shape{2, 5}));
  EXPECT_EQ(matmul(zeros({2, 4, 3}), zeros({3})).shape(), (Shape{2, 4}));
  EXPECT_TT_ERROR(matmul(zeros({}), zeros({3})), "matmul", "0-d");
}

TEST(Ch04_Matmul, AttentionStyleGraph) {
  // scores = q @ k^T / sqrt(d) over [B, H, T, d] views made by reshape + transpose.
  auto attn = [](const std::vector<Tensor>& in) {
    Tensor q = transpose(reshape(in[0], {2, 3, 2, 4}), 1, 2);  // [B, H, T, d]
    Tensor k = transpose(reshape(in[1], {2, 3, 2, 4}), 1, 2);
    return matmul(matmul(q, transpose(k, -2, -1)) * 0.5, q);
  };
  EXPECT_TRUE(gradcheck_ok(attn, {leaf64({2, 3, 8}, 50), leaf64({2, 3, 8}, 51)}));
}

}  // namespace
}  // namespace tt
