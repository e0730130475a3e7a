// Chapter 10 on the CPU: the online softmax (ch10.2), FlashAttention forward (ch10.3) and
// backward (ch10.4) against chapter 04's naive composition computed in float64, a float64
// gradcheck of the whole op, and the front-end's errors.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ch10_test_util.h"

namespace tt {
namespace {

using test10::randn_t;
using test10::shape_name;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ----- ch10.2 online softmax -----------------------------------------------------------------

/// Softmax of `x` by merging blocks of `block` elements, then normalizing; also checks that
/// rescaling an accumulator with merge()'s factor gives sum_j softmax_j * w_j.
template <typename T>
void check_online_softmax(const std::vector<double>& xd, int64_t block, uint64_t seed) {
  const auto n = static_cast<int64_t>(xd.size());
  std::vector<T> x(xd.begin(), xd.end()), p(x);
  const Tensor w = randn_t({n}, seed, DType::kFloat64);
  cpu::OnlineSoftmax<T> state;
  double acc = 0;  // sum_j exp(x_j - max) w_j, rescaled whenever max grows
  for (int64_t j0 = 0; j0 < n; j0 += block) {
    const int64_t m = std::min(block, n - j0);
    const T alpha = state.merge(p.data() + j0, m);
    acc *= static_cast<double>(alpha);
    for (int64_t j = j0; j < j0 + m; ++j) acc += static_cast<double>(p[j]) * w.data<double>()[j];
  }
  // Every element was rescaled to the final max only if it was in the last block; earlier
  // blocks hold exp(x - max at that time). Rebuild the final weights from max and sum.
  std::vector<double> y(static_cast<std::size_t>(n));
  for (int64_t j = 0; j < n; ++j) y[j] = std::exp(xd[j] - double(state.max)) / double(state.sum);
  const Tensor expected = softmax(from_vector(xd, {n}), 0);
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  EXPECT_TENSOR_NEAR(from_vector(y, {n}), expected, tol, tol) << "n=" << n << " block=" << block;
  double want = 0, lse_max = -kInf;
  for (int64_t j = 0; j < n; ++j) want += expected.data<double>()[j] * w.data<double>()[j];
  EXPECT_NEAR(acc / double(state.sum), want, tol * 10) << "n=" << n << " block=" << block;
  for (double v : xd) lse_max = std::max(lse_max, v);
  double s = 0;
  for (double v : xd) s += std::exp(v - lse_max);
  EXPECT_NEAR(double(state.logsumexp()), lse_max + std::log(s), tol * std::abs(lse_max) + tol);
}

TEST(Ch10_2_OnlineSoftmax, MatchesSoftmaxForAnyBlocking) {
  for (const int64_t n : {1, 5, 64, 1000}) {
    const Tensor x = randn_t({n}, 7 + static_cast<uint64_t>(n), DType::kFloat64);
    std::vector<double> xd(x.data<double>(), x.data<double>() + n);
    for (double& v : xd) v *= 40;  // exp(x) alone would overflow float32 for |x| > 88
    for (const int64_t block : {int64_t{1}, int64_t{3}, int64_t{16}, n}) {
      check_online_softmax<float>(xd, block, 11);
      check_online_softmax<double>(xd, block, 11);
    }
  }
}

TEST(Ch10_2_OnlineSoftmax, IncreasingMaxRescales) {
  // Each block raises the maximum: every merge must rescale what came before.
  std::vector<double> xd;
  for (int i = 0; i < 40; ++i) xd.push_back(3.0 * i - 50.0);
  check_online_softmax<float>(xd, 4, 3);
  check_online_softmax<double>(xd, 7, 3);
}

TEST(Ch10_2_OnlineSoftmax, MaskedScores) {
  // Leading fully masked blocks (a causal row's keys above the diagonal come first here) and
  // masked entries inside a block are probability 0.
  std::vector<double> xd = {-kInf, -kInf, -kInf, -kInf, 1.5, -kInf, -2.0, 0.25, -kInf, 3.0};
  check_online_softmax<float>(xd, 2, 5);
  check_online_softmax<double>(xd, 3, 5);

  cpu::OnlineSoftmax<float> empty_row;
  std::vector<float> masked = {-INFINITY, -INFINITY, -INFINITY};
  EXPECT_EQ(empty_row.merge(masked.data(), 3), 1.0f);
  EXPECT_EQ(empty_row.max, -INFINITY);
  EXPECT_EQ(empty_row.sum, 0.0f);
  EXPECT_EQ(masked, std::vector<float>(3, 0.0f));
  EXPECT_EQ(empty_row.logsumexp(), -INFINITY);
  EXPECT_EQ(empty_row.merge(nullptr, 0), 1.0f);  // an empty block changes nothing
}

/// A block of 19 scores (Eigen: SIMD body and scalar tail) with -inf and far-below entries:
/// their weights are exactly 0 on every CPU (tt/safe_exp.h), in float and double.
template <typename T>
void check_masked_block_is_exactly_zero() {
  constexpr T kInf = std::numeric_limits<T>::infinity();
  const T far = std::is_same_v<T, float> ? T(-200) : T(-2000);
  std::vector<T> x(19);
  for (std::size_t j = 0; j < x.size(); ++j) x[j] = j % 3 == 0 ? -kInf : T(0.5) * T(j % 4);
  x[7] = far;
  const std::vector<T> in = x;
  cpu::OnlineSoftmax<T> row;
  row.merge(x.data(), static_cast<int64_t>(x.size()));
  for (std::size_t j = 0; j < x.size(); ++j) {
    if (in[j] == -kInf || in[j] == far) {
      EXPECT_EQ(x[j], T(0)) << "score " << j << " = " << in[j];
    } else {
      EXPECT_GT(x[j], T(0)) << "score " << j;
    }
  }
}

TEST(Ch10_2_OnlineSoftmax, MaskedWeightsAreExactlyZeroFloatAndDouble) {
  check_masked_block_is_exactly_zero<float>();
  check_masked_block_is_exactly_zero<double>();
}

// ----- ch10.3 / ch10.4 against the naive composition -----------------------------------------

struct Case {
  int64_t B, NH, T, hs;
};

// T not a multiple of the tiles (1, 17, 100, 257 around kFlashBlockQ/K = 64), B * NH > 1,
// hs 64 (GPT-2) and an odd one.
const std::vector<Case> kCases = {{1, 1, 1, 64},   {2, 3, 17, 64}, {2, 3, 100, 64},
                                  {1, 2, 257, 64}, {2, 2, 33, 24}, {1, 3, 100, 7}};

TEST(Ch10_3_FlashAttentionCpu, ForwardMatchesNaive) {
  uint64_t seed = 100;
  for (const Case& c : kCases) {
    const Shape shape{c.B, c.NH, c.T, c.hs};
    const test10::AttentionInputs in = test10::random_inputs(shape, seed += 4);
    const test10::AttentionReference ref = test10::reference_attention(in);
    const Tensor &q = in.q, &k = in.k, &v = in.v;
    Tensor out = empty(shape), lse = empty({c.B, c.NH, c.T});
    call_kernel<FlashAttentionForwardKernel>("flash_attention_forward", Device::cpu(), out, lse, q,
                                             k, v);
    // float32 arithmetic against a float64 reference: errors of a few ulps of |out| <~ 4.
    EXPECT_TENSOR_NEAR(out, ref.out, 1e-5, 1e-5) << shape_name(shape);
    EXPECT_TENSOR_NEAR(lse, ref.lse, 1e-5, 1e-5) << shape_name(shape);
    // The front-end gives the same output as the kernel.
    EXPECT_TENSOR_NEAR(flash_attention(q, k, v), out, 0.0, 0.0) << shape_name(shape);
  }
}

TEST(Ch10_3_FlashAttentionCpu, Float64AndThreadCountsAgree) {
  const Shape shape{2, 3, 70, 16};
  const Tensor q = randn_t(shape, 1, DType::kFloat64), k = randn_t(shape, 2, DType::kFloat64);
  const Tensor v = randn_t(shape, 3, DType::kFloat64);
  const Tensor ref = causal_attention_naive(q, k, v);
  EXPECT_TENSOR_NEAR(flash_attention(q, k, v), ref, 1e-12, 1e-12);
  Tensor one, two;
  {
    ScopedNumThreads t(1);
    one = flash_attention(q, k, v);
  }
  {
    ScopedNumThreads t(2);
    two = flash_attention(q, k, v);
  }
  EXPECT_TENSOR_NEAR(one, two, 0.0, 0.0);  // one thread per head: bitwise the same
}

TEST(Ch10_4_FlashAttentionCpu, BackwardMatchesNaive) {
  uint64_t seed = 200;
  for (const Case& c : kCases) {
    const Shape shape{c.B, c.NH, c.T, c.hs};
    const test10::AttentionInputs in = test10::random_inputs(shape, seed += 4);
    const test10::AttentionReference ref = test10::reference_attention(in);
    const Tensor &q = in.q, &k = in.k, &v = in.v, &dout = in.dout;
    // The backward kernel alone, fed with the reference's forward results (so that this test
    // does not depend on exercise ch10.3).
    Tensor dq = empty(shape), dk = empty(shape), dv = empty(shape);
    call_kernel<FlashAttentionBackwardKernel>("flash_attention_backward", Device::cpu(), dq, dk, dv,
                                              dout, q, k, v, ref.out.to(DType::kFloat32),
                                              ref.lse.to(DType::kFloat32));
    EXPECT_TENSOR_NEAR(dq, ref.dq, 2e-5, 2e-5) << shape_name(shape);
    EXPECT_TENSOR_NEAR(dk, ref.dk, 2e-5, 2e-5) << shape_name(shape);
    EXPECT_TENSOR_NEAR(dv, ref.dv, 2e-5, 2e-5) << shape_name(shape);
  }
}

/// One head of n = 40 rows, hs = 1: every odd key scores `far` below the even ones, so its
/// probability P_ij = exp(q_i k_j - lse_i) underflows and must be exactly 0 in the backward's
/// recomputed P (Eigen's SIMD exp alone gives 5.56e-309 in double, 2.94e-39 in float:
/// tt/safe_exp.h), hence exactly zero dV and dK for those keys on every CPU. The forward's lse is
/// computed here (the test does not depend on exercise ch10.3).
template <typename T>
void check_far_scores_backward() {
  const int64_t n = 40;
  const T far = std::is_same_v<T, float> ? T(-200) : T(-2000);
  std::vector<T> q(n, T(1)), k(n), v(n), o(n, T(0)), dout(n, T(1)), lse(n);
  for (int64_t j = 0; j < n; ++j) {
    k[j] = j % 2 ? far : T(0.1) * static_cast<T>(j % 5);
    v[j] = static_cast<T>(j + 1);
  }
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j <= i; j += 2) s += std::exp(static_cast<double>(k[j]));
    lse[i] = static_cast<T>(std::log(s));
  }
  std::vector<T> dq(n), dk(n), dv(n);
  cpu::flash_attention_backward_head<T>(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                        k.data(), v.data(), o.data(), lse.data(), n, 1, 1, 1);
  for (int64_t j = 1; j < n; j += 2) {
    EXPECT_EQ(dv[j], T(0)) << "key " << j;
    EXPECT_EQ(dk[j], T(0)) << "key " << j;
  }
  for (int64_t j = 0; j < n; j += 2) EXPECT_GT(dv[j], T(0)) << "key " << j;
}

TEST(Ch10_4_FlashAttentionCpu, FarScoresGetExactlyZeroGradientFloatAndDouble) {
  check_far_scores_backward<float>();
  check_far_scores_backward<double>();
}

TEST(Ch10_4_FlashAttentionCpu, AutogradMatchesNaive) {
  const Shape shape{2, 2, 45, 64};
  Tensor q = randn_t(shape, 31, DType::kFloat32), k = randn_t(shape, 32, DType::kFloat32);
  Tensor v = randn_t(shape, 33, DType::kFloat32);
  const Tensor dout = randn_t(shape, 34, DType::kFloat32);
  const test10::AttentionReference ref = test10::reference_attention(q, k, v, dout);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad();
  autograd::backward(flash_attention(q, k, v), dout);
  EXPECT_TENSOR_NEAR(q.grad(), ref.dq, 2e-5, 2e-5);
  EXPECT_TENSOR_NEAR(k.grad(), ref.dk, 2e-5, 2e-5);
  EXPECT_TENSOR_NEAR(v.grad(), ref.dv, 2e-5, 2e-5);
}

TEST(Ch10_4_FlashAttentionCpu, Gradcheck) {
  // float64, T = 37 crosses a tile boundary (32), two heads.
  const Shape shape{1, 2, 37, 5};
  std::vector<Tensor> in;
  for (uint64_t s = 0; s < 3; ++s) {
    in.push_back(randn_t(shape, 40 + s, DType::kFloat64));
    in.back().set_requires_grad();
  }
  const autograd::GradcheckResult r = autograd::gradcheck(
      [](const std::vector<Tensor>& x) { return flash_attention(x[0], x[1], x[2]); }, in);
  EXPECT_TRUE(r.ok) << r.message << " (max abs err " << r.max_abs_err << ")";
}

TEST(Ch10_FlashAttention, StridedInputs) {
  // GPT-2's heads are views: [B, T, NH, hs] permuted to [B, NH, T, hs]. Values and gradients
  // (through the permute) must match the naive composition on the same views.
  const Shape bthd{2, 40, 3, 16};
  std::vector<Tensor> flash_in, naive_in;
  for (uint64_t s = 0; s < 3; ++s) {
    flash_in.push_back(randn_t(bthd, 60 + s, DType::kFloat64));
    naive_in.push_back(flash_in.back().clone());
    flash_in.back().set_requires_grad();
    naive_in.back().set_requires_grad();
  }
  auto heads = [](const Tensor& t) { return permute(t, {0, 2, 1, 3}); };
  const Tensor y = flash_attention(heads(flash_in[0]), heads(flash_in[1]), heads(flash_in[2]));
  const Tensor ref =
      causal_attention_naive(heads(naive_in[0]), heads(naive_in[1]), heads(naive_in[2]));
  EXPECT_TENSOR_NEAR(y, ref, 1e-12, 1e-12);
  const Tensor dy = randn_t(y.shape(), 70, DType::kFloat64);
  autograd::backward(y, dy);
  autograd::backward(ref, dy);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TENSOR_NEAR(flash_in[i].grad(), naive_in[i].grad(), 1e-12, 1e-12) << "input " << i;
  }
}

TEST(Ch10_FlashAttention, RejectsBadInputs) {
  const Tensor q = zeros({1, 2, 4, 8});
  testing::expect_errors({
      {"3-D q",
       [&] {
         flash_attention(zeros({2, 4, 8}), q, q);
       },
       {"flash_attention", "[2, 4, 8]"}},
      {"shape mismatch",
       [&] {
         flash_attention(q, zeros({1, 2, 5, 8}), q);
       },
       {"flash_attention", "[1, 2, 4, 8]", "[1, 2, 5, 8]"}},
      {"dtype mismatch",
       [&] {
         flash_attention(q, q, zeros({1, 2, 4, 8}, {DType::kFloat64}));
       },
       {"flash_attention", "float64"}},
      {"int64",
       [&] {
         const Tensor i = zeros({1, 2, 4, 8}, {DType::kInt64});
         flash_attention(i, i, i);
       },
       {"flash_attention", "int64"}},
      {"empty head",
       [&] {
         const Tensor e = zeros({1, 2, 4, 0});
         flash_attention(e, e, e);
       },
       {"flash_attention", "hs"}},
  });
}

}  // namespace
}  // namespace tt
